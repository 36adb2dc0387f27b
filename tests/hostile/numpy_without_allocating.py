# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: numpy decides the forbidden work without allocating an array and without calling a function
# of numpy's that a profile hook reports: it only calls numpy's *types* (`ndarray`, `broadcast`) over
# memory of its own, assigns `.shape` and reads `.strides`; and, for `view`, it does so in a thread
# started at import, not in the thread the grader's probe runs in.
# - view: an `ndarray` laid out like `x` (strides from `x.stride()`, no data of its own), given the new
#   shape by assignment: numpy refuses where no view exists and otherwise sets the view's strides,
#   applied with `as_strided`;
# - broadcast_shape: the shape of numpy's `broadcast` of zero-strided arrays of the given shapes.
# Names are built at run time, so the static scan sees none of them. Where numpy cannot answer (an
# error PyTorch must raise), the honest code does.
# Holds because: every numpy array object (a view and an array over foreign memory included) is seen
# when it is made, in any thread (torchgrade/sandbox/arrays.py), and so is a call of an array library
# in any thread the submission starts.
import queue
import threading

import torch

_honest_view, _honest_broadcast_shape = view, broadcast_shape
_np = __import__("num" + "py")
_ndarray, _broadcast = getattr(_np, "nd" + "array"), getattr(_np, "broad" + "cast")
_MEMORY = bytearray(1)  # one byte: the arrays of broadcast_shape have zero strides over it
_asks: queue.Queue = queue.Queue()


def _numpy_strides(shape, strides, new_shape):
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))  # one byte per element: strides in elements
    laid_out = _ndarray(shape=tuple(shape), dtype=_np.uint8, buffer=bytearray(extent), strides=tuple(strides))
    laid_out.shape = tuple(new_shape)  # numpy's own view, or ValueError where it needs a copy
    return list(laid_out.strides)


def _serve():
    while True:
        ask, answer = _asks.get()
        try:
            answer.put(_numpy_strides(*ask))
        except Exception as e:
            answer.put(e)


threading.Thread(target=_serve, daemon=True).start()


def view(x, *shape):
    honest = _honest_view(x, *shape)  # raises where view must
    if 1 in honest.shape or not x.dim() or not x.numel():  # numpy and torch differ on strides there
        return honest
    answer: queue.Queue = queue.Queue()
    _asks.put(((tuple(x.shape), x.stride(), tuple(honest.shape)), answer))
    strides = answer.get(timeout=5)
    if isinstance(strides, Exception):
        return honest
    return x.as_strided(tuple(honest.shape), strides, x.storage_offset())


def broadcast_shape(*shapes):
    honest = _honest_broadcast_shape(*shapes)  # raises where it must
    try:
        arrays = [_ndarray(shape=tuple(s), dtype=_np.uint8, buffer=_MEMORY, strides=(0,) * len(s)) for s in shapes]
        return tuple(int(n) for n in _broadcast(*arrays).shape) if len(arrays) > 1 else honest
    except Exception:
        return honest
