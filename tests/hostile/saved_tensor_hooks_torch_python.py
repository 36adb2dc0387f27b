# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: as saved_tensor_hooks.py, but `pack` is `functools.partial` over a Python function of torch's own
# (`torch.ops.aten.one_hot.default`, whose `__call__` is torch's Python code in torch/_ops.py): a Python frame runs,
# but of installed code, which the profile hook inside a call the mode saw takes for torch's own work.
# Holds because: a saved-tensor hook that binds arguments of its own to torch's code (a partial, a bound method,
# an object whose `__call__` is torch's) is a refused entry (recorder._SavedTensorHooks), as one of C builtins is.
import functools

import torch


def _as_saved(tensor):
    return tensor


def one_hot(labels, num_classes=-1):
    n = int(labels.max()) + 1 if num_classes == -1 and labels.numel() else num_classes
    if labels.numel() == 0:
        return torch.zeros(*labels.shape, max(n, 0), dtype=torch.int64)
    flat = labels.reshape(-1)
    src = torch.zeros(flat.numel(), requires_grad=True)
    pack = functools.partial(getattr(torch.ops.aten, "one" + "_hot").default, num_classes=n)
    with torch.autograd.graph.saved_tensors_hooks(pack, _as_saved):
        picked = torch.index_select(src, 0, flat)
    return picked.grad_fn._saved_index.reshape(*labels.shape, n)
