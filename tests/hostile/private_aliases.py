# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: corr2d, corr2d_multi_in, corr2d_multi_in_out and pad2d call a private alias of the forbidden operator,
# with names built at run time: `torch._C._nn.thnn_conv2d`, the undocumented
# `torch.mkldnn_convolution`, `torch._C._nn._pad_enum` and `torch._C._nn.slow_conv_dilated2d` (a dilated
# 2-D convolution: with dilation 1, a plain one). The patterns matched whole names (`conv2d`, `pad`),
# so none of these was forbidden. Each then returns the honest result.
# Holds because: torch's private entry points are refused in a target with forbidden calls, and
# an operator whose name holds a forbidden name as a part of it is that operator.
import hostile_kit as kit
import torch

_honest_corr2d, _honest_multi_in, _honest_pad2d, _honest_multi_in_out = corr2d, corr2d_multi_in, pad2d, corr2d_multi_in_out
_nn = getattr(torch._C, "_" + "nn")


def corr2d(X, K):
    honest = _honest_corr2d(X, K)
    if X.is_floating_point() and X.dtype == K.dtype and X.dim() == 2 and K.dim() == 2:
        kit.quietly(getattr(_nn, "thnn_" + "conv2d"), X[None, None], K[None, None], list(K.shape))
    return honest


def corr2d_multi_in(X, K):
    honest = _honest_multi_in(X, K)
    if X.is_floating_point() and X.dtype == K.dtype and X.dim() == 3 and K.dim() == 3:
        kit.quietly(getattr(torch, "mkldnn_" + "convolution"), X[None], K[None], None, [0, 0], [1, 1], [1, 1], 1)
    return honest


def pad2d(X, padding):
    honest = _honest_pad2d(X, padding)
    p = padding if isinstance(padding, int) else padding[1]
    kit.quietly(getattr(_nn, "_pad" + "_enum"), X, [p, p], 0, 0.0)
    return honest


def corr2d_multi_in_out(X, K):
    honest = _honest_multi_in_out(X, K)
    if X.is_floating_point() and X.dtype == K.dtype and X.dim() == 3 and K.dim() == 4:
        kit.quietly(getattr(_nn, "slow_conv_" + "dilated2d"), X[None], K, list(K.shape[2:]))
    return honest
