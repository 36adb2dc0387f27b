# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: view, gather and scatter_ let numpy do the forbidden work on the student's tensors, with
# names built at run time so that the static scan sees none: view takes the strides of numpy's
# `reshape` of `x.numpy()` and builds the result with `as_strided`; gather is numpy's
# `take_along_axis`; scatter_ numpy's `put_along_axis` on `target`'s memory. Neither runtime layer
# watched numpy. Where numpy cannot answer, the honest code does.
# Holds because: a target with forbidden calls may not hand its tensors to an array library (the
# grader cannot watch what numpy computes), nor take arrays from one.
import torch

_honest_view, _honest_gather, _honest_scatter_ = view, gather, scatter_
_np = __import__("num" + "py")


def view(x, *shape):
    honest = _honest_view(x, *shape)  # raises where view must
    try:
        a = getattr(x.detach(), "num" + "py")()
        b = getattr(a, "re" + "shape")(honest.shape, order="A")
        if _np.shares_memory(a, b):
            return x.as_strided(honest.shape, [s // a.itemsize for s in b.strides], x.storage_offset())
    except Exception:
        pass
    return honest


def gather(x, dim, index):
    honest = _honest_gather(x, dim, index)
    try:
        out = getattr(_np, "take_along" + "_axis")(_np.asarray(x.detach()), _np.asarray(index), dim)
        _ = torch.as_tensor(out)
    except Exception:
        pass
    return honest


def scatter_(target, dim, index, src):
    try:
        values = src.detach().numpy() if isinstance(src, torch.Tensor) else src
        getattr(_np, "put_along" + "_axis")(target.detach().clone().numpy(), index.numpy(), values, dim)
    except Exception:
        pass
    return _honest_scatter_(target, dim, index, src)
