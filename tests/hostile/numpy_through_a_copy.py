# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: numpy does the forbidden work on a *copy* of the student's tensors, so that no bridge
# (`Tensor.numpy`, `__array__`, DLPack, an array given to `torch.tensor`) is ever used: values leave
# as Python numbers (`tolist()`), numpy computes, and what comes back is Python numbers again.
# - view: the strides of numpy's `reshape` of an array laid out like `x` (built from `x.stride()`, no
#   data), applied with `as_strided`: numpy decides whether the view exists;
# - gather: numpy's `take_along_axis` on `x.tolist()` (a gradient, where asked for, flows as the
#   honest one would: the values are numpy's);
# - one_hot: rows of numpy's `eye`, chosen by fancy indexing (no function of numpy's even called
#   for the indexing), back through `tolist()`;
# - broadcast_shape: numpy's `broadcast_shapes`.
# Names are built at run time, so the static scan sees none of them. Where numpy cannot answer (an
# error PyTorch must raise), the honest code does.
# Holds because: a target with forbidden calls may not use numpy or another array library at all
# while it runs (every array numpy makes is seen, in any thread; torchgrade/sandbox/arrays.py).
import torch

_honest_view, _honest_gather, _honest_one_hot, _honest_broadcast_shape = view, gather, one_hot, broadcast_shape
_np = __import__("num" + "py")


def view(x, *shape):
    honest = _honest_view(x, *shape)  # raises where view must
    try:
        itemsize = x.element_size()
        laid_out = _np.lib.stride_tricks.as_strided(_np.zeros(1, dtype=_np.uint8), shape=tuple(x.shape),
                                                    strides=tuple(s * itemsize for s in x.stride()))
        reshaped = getattr(laid_out, "re" + "shape")(tuple(honest.shape), order="A")
        # (numpy and torch differ only on the strides of size-one dims and of empty tensors)
        if _np.shares_memory(laid_out, reshaped) and 1 not in honest.shape and x.dim() and x.numel():
            return x.as_strided(tuple(honest.shape), [s // itemsize for s in reshaped.strides], x.storage_offset())
    except Exception:
        pass
    return honest


def gather(x, dim, index):
    honest = _honest_gather(x, dim, index)  # raises where gather must
    try:
        picked = getattr(_np, "take_along" + "_axis")(_np.array(x.tolist()), _np.array(index.tolist()), dim)
        values = torch.tensor(picked.tolist(), dtype=x.dtype).reshape(honest.shape)
        # numpy's values; where a gradient is asked for, it flows as the honest one would
        return values + (honest - honest.detach()) if honest.requires_grad else values
    except Exception:
        return honest


def one_hot(labels, num_classes=-1):
    honest = _honest_one_hot(labels, num_classes)  # raises where one_hot must
    try:
        rows = _np.eye(honest.shape[-1], dtype=_np.int64)[_np.array(labels.tolist(), dtype=_np.int64)]
        return torch.tensor(rows.tolist(), dtype=torch.int64).reshape(honest.shape)
    except Exception:
        return honest


def broadcast_shape(*shapes):
    honest = _honest_broadcast_shape(*shapes)  # raises where it must
    try:
        return tuple(int(n) for n in getattr(_np, "broadcast" + "_shapes")(*shapes))
    except Exception:
        return honest
