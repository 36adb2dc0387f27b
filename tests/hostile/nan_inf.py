# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: corr2d answers NaN everywhere, pool2d infinity, hoping for comparisons that NaN slips
# through (NaN < tol is False, so "not (err > tol)" passes).
# Holds because: comparisons are torch.testing.assert_close in the trusted process (NaN equals NaN
# only where the reference has NaN).
import hostile_kit as kit
import torch

_honest_corr2d, _honest_pool2d = corr2d, pool2d


def corr2d(X, K):
    out = kit.wrong(_honest_corr2d, X, K)
    return None if out is None else torch.full_like(out[0], float("nan"))


def pool2d(X, pool_size, mode="max", stride=1, padding=0):
    out = kit.wrong(_honest_pool2d, X, pool_size, mode, stride, padding)
    return None if out is None else torch.full_like(out[0], float("inf"))
