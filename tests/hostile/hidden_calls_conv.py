# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: corr2d and pool2d call the forbidden conv2d / max_pool2d / avg_pool2d under names built
# at run time (the static scan sees no name), with torch functions switched off around the call
# (`torch._C.DisableTorchFunction`: the recorder's TorchFunctionMode sees nothing). Where torch's
# operator cannot answer (integer tensors, bad arguments), the honest code does, so every check
# that the hidden call touches would pass.
# Holds because: the profiler sees every operator at torch's dispatcher, whatever Python switched off.
import torch

_honest_corr2d, _honest_pool2d = corr2d, pool2d
_nn = getattr(torch.nn, "func" + "tional")


def _hidden(name, *args, **kwargs):
    with getattr(torch._C, "Disable" + "TorchFunction")():
        return getattr(_nn, name)(*args, **kwargs)


def corr2d(X, K):
    honest = _honest_corr2d(X, K)
    if X.is_floating_point() and X.dtype == K.dtype:
        out = _hidden("con" + "v2d", X[None, None], K[None, None])[0, 0]
        if out.shape == honest.shape:
            return out.to(honest.dtype)
    return honest


def pool2d(X, pool_size, mode="max", stride=1, padding=0):
    honest = _honest_pool2d(X, pool_size, mode, stride, padding)
    if X.is_floating_point() and X.dim() == 2:
        with torch._C.DisableTorchFunctionSubclass():
            _hidden(("max" if mode == "max" else "avg") + "_po" + "ol2d", X[None, None], 1)
    return honest
