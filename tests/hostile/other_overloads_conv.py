# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: corr2d and pad2d call the forbidden operator under an overload other than `.default`
# (`torch.ops.aten.conv2d.padding`, `constant_pad_nd.out`), with names built at run time: only
# `.default`/`.Tensor` were taken off before matching. Each then returns the honest result.
# Holds because: a call is matched by its operator, whatever the overload.
import hostile_kit as kit
import torch

_honest_corr2d, _honest_pad2d = corr2d, pad2d
_aten = getattr(torch.ops, "at" + "en")


def corr2d(X, K):
    honest = _honest_corr2d(X, K)
    if X.is_floating_point() and X.dtype == K.dtype and X.dim() == 2 and K.dim() == 2:
        kit.quietly(getattr(getattr(_aten, "con" + "v2d"), "padding"), X[None, None], K[None, None], None, [1, 1], "valid")
    return honest


def pad2d(X, padding):
    honest = _honest_pad2d(X, padding)
    p = padding if isinstance(padding, int) else padding[1]
    kit.quietly(getattr(getattr(_aten, "constant" + "_pad_nd"), "out"), X.detach(), [p, p], 0, out=X.new_empty(0).detach())
    return honest
