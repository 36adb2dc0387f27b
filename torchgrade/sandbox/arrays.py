"""Array libraries watched while a target with forbidden calls runs: numpy doing the forbidden work.

A target with forbidden calls may not use numpy or another array library at all (what they compute
is not torch's, so neither the recorder's mode nor the profiler sees it): the bridges that hand a
tensor's data to one are refused by name (``torchgrade.sandbox.entries``), and the same work done on a
*copy* (``x.tolist()`` into ``np.array``) is seen here, at two layers:

1. **numpy's allocator.** Every array numpy makes with data of its own (``np.array``, ``np.eye``,
   ``take_along_axis``, a ufunc's result, fancy indexing, a copy) takes its memory from the handler of
   NEP 49 (``PyDataMem_Handler``). The default handler's ``malloc``/``calloc``/``realloc`` are wrapped,
   once per sandbox process before any student code: while a request of such a target is watched, an
   array made by the student's code (its windows in the probe's thread; any other thread at all) is
   recorded, with the student's line and the innermost numpy function. Nothing is paid where numpy is
   not used.
2. **A profile hook** in the student's windows of such a target (the probe's thread): a call into an
   array library's Python functions (``np.broadcast_shapes``, ``as_strided``) or its builtins and
   methods (``np.frombuffer``, ``ndarray.reshape``), which make views and no array of their own.

What stays open is in SECURITY.md ("Forbidden calls").
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from typing import Any, Callable

from ..forbidden import ARRAYS

#: Array libraries a sandbox can reach, by their top-level package (numpy's family allocate through it).
LIBRARIES = frozenset({"numpy", "scipy", "pandas", "dask", "xarray", "numexpr", "numba", "sympy", "mpmath", "jax",
                       "jaxlib", "cupy", "tensorflow", "pyarrow", "sparse", "array_api_strict", "ml_dtypes"})

#: (the watch, the submission's folder, the thread whose windows are watched) while a request is armed.
_state: tuple[Any, str, int] | None = None
_keep: list = []  # the C callbacks numpy's allocator calls: alive as long as the process


def arm(watch: Any, submission: str) -> None:
    global _state
    _state = (watch, submission, threading.get_ident())


def disarm() -> None:
    global _state
    _state = None


def _library(module: Any) -> str | None:
    name = module if isinstance(module, str) else getattr(module, "__name__", None)
    if isinstance(name, str) and name.partition(".")[0] in LIBRARIES:
        return name
    return None


def _record(state: tuple[Any, str, int], frame: Any, what: str) -> None:
    """Note `what` (a library's function) at the student's innermost line from `frame` up."""
    watch, submission, _ = state
    where = ""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(submission):
            where = f"{filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"
            break
        if what == "numpy" and _library(frame.f_globals.get("__name__")):
            what = f"{frame.f_globals['__name__']}.{qualname(frame.f_code)}"
        frame = frame.f_back
    watch.mode.calls.setdefault(f"{ARRAYS}{what}", where or "run time, in a thread of its own")


def qualname(code: Any) -> str:
    """A code object's qualified name (its bare name on Python 3.10, which has no co_qualname)."""
    return getattr(code, "co_qualname", code.co_name)


def _allocated(frame: Any) -> None:
    state = _state
    if state is None:
        return
    watch = state[0]
    if threading.get_ident() == state[2] and watch.depth == 0:
        return  # the probe's own work, between the student's windows
    _record(state, frame, "numpy")


def watch_numpy_allocator() -> bool:
    """Wrap the allocation functions of numpy's default memory handler (NEP 49), which every thread's
    arrays use unless a handler of its own was set. False where numpy is absent or older than 1.22."""
    if _keep:
        return True
    try:
        import numpy
    except ImportError:
        return False
    umath = sys.modules.get("numpy._core._multiarray_umath") or sys.modules.get("numpy.core._multiarray_umath")
    api = getattr(umath, "_ARRAY_API", None)
    if api is None:
        return False
    pointer = ctypes.pythonapi.PyCapsule_GetPointer
    pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = pointer(api, None)
    # PyDataMem_GetHandler is entry 305 of numpy's C API since 1.22 (numpy/__multiarray_api.h)
    if numpy.lib.NumpyVersion(numpy.__version__) < "1.22.0" or not table:
        return False
    # (PYFUNCTYPE: called with the GIL held, which numpy's own allocation cache relies on)
    get_handler = ctypes.PYFUNCTYPE(ctypes.py_object)(ctypes.c_void_p.from_address(table + 305 * ctypes.sizeof(ctypes.c_void_p)).value)
    handler = get_handler()
    address = pointer(handler, b"mem_handler")
    if not address:
        return False

    size_t, void_p = ctypes.c_size_t, ctypes.c_void_p
    malloc_t = ctypes.CFUNCTYPE(void_p, void_p, size_t)
    calloc_t = ctypes.CFUNCTYPE(void_p, void_p, size_t, size_t)
    realloc_t = ctypes.CFUNCTYPE(void_p, void_p, void_p, size_t)

    class Allocator(ctypes.Structure):  # PyDataMemAllocator, after PyDataMem_Handler's name and version
        _fields_ = [("ctx", void_p), ("malloc", void_p), ("calloc", void_p), ("realloc", void_p), ("free", void_p)]

    allocator = Allocator.from_address(address + 128)
    if ctypes.c_uint8.from_address(address + 127).value != 1:  # a handler version this layout is not
        return False
    real_malloc = ctypes.PYFUNCTYPE(void_p, void_p, size_t)(allocator.malloc)
    real_calloc = ctypes.PYFUNCTYPE(void_p, void_p, size_t, size_t)(allocator.calloc)
    real_realloc = ctypes.PYFUNCTYPE(void_p, void_p, void_p, size_t)(allocator.realloc)

    def seen(call: Callable) -> Callable:
        def wrapped(*args: Any) -> Any:
            if _state is not None:
                with contextlib.suppress(BaseException):
                    _allocated(sys._getframe(1))
            return call(*args)
        return wrapped

    callbacks = (malloc_t(seen(real_malloc)), calloc_t(seen(real_calloc)), realloc_t(seen(real_realloc)))
    _keep.extend((handler, real_malloc, real_calloc, real_realloc, *callbacks))
    for field, callback in zip(("malloc", "calloc", "realloc"), callbacks):
        setattr(allocator, field, ctypes.cast(callback, void_p).value)
    return True


def profile(frame: Any, event: str, arg: Any) -> None:
    """The profile hook of the student's windows: a call into an array library's code or builtins."""
    state = _state
    if state is None or event not in ("call", "c_call"):
        return
    try:  # (a profile function that raises is removed: the audit would take that for tampering)
        if event == "call":
            name = _library(frame.f_globals.get("__name__"))
            if name is not None:
                _record(state, frame, f"{name}.{qualname(frame.f_code)}")
            return
        owner = getattr(arg, "__self__", None)  # a module (np.frombuffer) or an array (its methods)
        name = _library(getattr(arg, "__module__", None)) or (
            _library(owner) if isinstance(owner, type(sys)) else _library(type(owner).__module__))
        if name is not None:
            _record(state, frame, f"{name}.{getattr(arg, '__qualname__', None) or getattr(arg, '__name__', '?')}")
    except Exception:
        pass
