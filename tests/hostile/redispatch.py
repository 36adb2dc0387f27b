# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: view, gather and scatter_ run the forbidden operator through `OpOverload.redispatch`
# (and the handle's `redispatch_boxed`), with names built at run time: a redispatch enters the
# operator's kernel below the TorchFunctionMode and below RecordFunction, so neither the mode nor
# the profiler sees it. Each then returns the honest result, so only the forbidden call can cost it.
# Holds because: redispatch is refused inside the sandbox while a target with forbidden calls runs.
import torch

_honest_view, _honest_gather, _honest_scatter_ = view, gather, scatter_
_aten = getattr(torch.ops, "at" + "en")
_cpu = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def _quietly(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def view(x, *shape):
    op = getattr(getattr(_aten, "vi" + "ew"), "default")
    size = list(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else list(shape)
    _quietly(getattr(op, "re" + "dispatch"), _cpu, x, size)
    return _honest_view(x, *shape)


def gather(x, dim, index):
    op = getattr(getattr(_aten, "gat" + "her"), "default")
    _quietly(getattr(op, "re" + "dispatch"), _cpu, x, dim, index)
    return _honest_gather(x, dim, index)


def scatter_(target, dim, index, src):
    op = getattr(getattr(_aten, "scat" + "ter"), "src")
    _quietly(op._handle.redispatch_boxed, _cpu, target.detach().clone(), dim, index, src)
    return _honest_scatter_(target, dim, index, src)
