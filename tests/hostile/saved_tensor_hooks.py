# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: one_hot's forbidden operator runs as a saved-tensor hook built of C builtins only. Inside
# `torch.autograd.graph.saved_tensors_hooks(pack, unpack)` an index_select by the labels (allowed) saves them for
# its backward, and autograd calls `pack` on them while it runs: `pack` is `functools.partial` over torch's
# C-level one_hot, so no Python frame runs and the mode, busy with index_select, sees nothing. The one-hot rows
# come back through `unpack` (a C builtin too) when the student reads the saved index.
# Holds because: hooks given to saved_tensors_hooks are checked as a call's arguments are: a callable that runs
# no Python code is a refused entry (recorder._SavedTensorHooks), and the target loses.
import functools

import torch


def one_hot(labels, num_classes=-1):
    n = int(labels.max()) + 1 if num_classes == -1 and labels.numel() else num_classes
    if labels.numel() == 0:
        return torch.zeros(*labels.shape, max(n, 0), dtype=torch.int64)
    flat = labels.reshape(-1)
    src = torch.zeros(flat.numel(), requires_grad=True)
    pack = functools.partial(getattr(torch._C._nn, "one" + "_hot"), num_classes=n)
    with torch.autograd.graph.saved_tensors_hooks(pack, torch.Tensor.clone):
        picked = torch.index_select(src, 0, flat)
    return picked.grad_fn._saved_index.reshape(*labels.shape, n)
