# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: view, gather and one_hot make the forbidden call under a name built at run time (the
# static scan sees no name) where the recorder's TorchFunctionMode cannot see it: view with the
# mode popped off torch's stack (and pushed back), gather with every mode disabled
# (`_disable_current_modes`, then `DisableTorchFunction`), one_hot in a thread of its own (modes
# belong to a thread). Each then returns the honest result, so only the forbidden call can cost it.
# Holds because: the profiler sees every operator at torch's dispatcher, in every thread.
import threading

import torch
from torch.utils import _python_dispatch

_honest_view, _honest_gather, _honest_one_hot = view, gather, one_hot


def _call(x, name, *args):
    try:
        return getattr(x, name)(*args)
    except Exception:
        return None


def view(x, *shape):
    modes = []
    while torch._C._len_torch_function_stack():
        modes.append(torch._C._pop_torch_function_stack())
    try:
        _call(x, "vi" + "ew", *shape)
    finally:
        for mode in reversed(modes):
            torch._C._push_on_torch_function_stack(mode)
    return _honest_view(x, *shape)


def gather(x, dim, index):
    with getattr(_python_dispatch, "_disable_current" + "_modes")(), torch._C.DisableTorchFunction():
        _call(x, "gat" + "her", dim, index)
    return _honest_gather(x, dim, index)


def one_hot(labels, num_classes):
    fn = getattr(torch.nn.functional, "one" + "_hot")
    worker = threading.Thread(target=lambda: _call_fn(fn, labels, num_classes))
    worker.start()
    worker.join()
    return _honest_one_hot(labels, num_classes)


def _call_fn(fn, *args):
    try:
        fn(*args)
    except Exception:
        pass
