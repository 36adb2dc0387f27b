# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: read the recorder's own marker name off torch's function-mode stack, switch torch functions
# off, and make the forbidden call inside a marker of that name, so that at the dispatcher it looks
# like a call the recorder saw: view with a C++ marker (`_RecordFunctionFast`), gather with Python's
# `record_function`. Each then returns the honest result, so only the forbidden call can cost it.
# Holds because: the recorder counts the markers it makes; one more in the record is a forgery.
import torch

_honest_view, _honest_gather = view, gather


def _marker():
    depth = torch._C._len_torch_function_stack()
    return getattr(torch._C._get_function_stack_at(depth - 1), "mar" + "ker", None) if depth else None


def view(x, *shape):
    name = _marker()
    if name:
        with torch._C.DisableTorchFunction(), torch._C._profiler._RecordFunctionFast(name):
            getattr(x, "vi" + "ew")(*shape)
    return _honest_view(x, *shape)


def gather(x, dim, index):
    name = _marker()
    if name:
        with torch._C.DisableTorchFunction(), torch.autograd.profiler.record_function(name):
            getattr(x, "gat" + "her")(dim, index)
    return _honest_gather(x, dim, index)
