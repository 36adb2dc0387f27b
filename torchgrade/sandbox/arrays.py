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
2. **numpy's array objects.** A view (``reshape``, slicing, ``.shape = ...``) or an array over memory
   that is not numpy's (``np.ndarray(shape, buffer=..., strides=...)``, ``np.frombuffer``) allocates
   no data, but every ndarray object is made by its type's ``tp_alloc``, wrapped likewise (ndarray's
   and its subclasses'; one made later is wrapped at the next request, and one made during a request is
   recorded): numpy deciding a view's strides is seen as it happens, in any thread.
3. **A profile hook** in the student's windows of such a target (the probe's thread), and in every
   thread started in a sandbox process (``threading`` or ``_thread``), the student's included: a call
   into an array library's Python functions (``np.broadcast_shapes``; sympy, mpmath, which allocate
   nothing through numpy) or its builtins and methods (``np.frombuffer``, ``ndarray.reshape``). In a
   thread other than the probe's, every such call while a request is armed is the student's.

What stays open is in SECURITY.md ("Forbidden calls").
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from typing import Any, Callable

from torchgrade.sandbox.forbidden import ARRAYS

#: Array libraries a sandbox can reach, by their top-level package (numpy's family allocate through it).
LIBRARIES = frozenset({"numpy", "scipy", "pandas", "dask", "xarray", "numexpr", "numba", "sympy", "mpmath", "jax",
                       "jaxlib", "cupy", "tensorflow", "pyarrow", "sparse", "array_api_strict", "ml_dtypes"})

#: (the watch, the submission's folder, the thread whose windows are watched) while a request is armed.
_state: tuple[Any, str, int] | None = None
_keep: list = []  # the C callbacks numpy's allocator calls: alive as long as the process


def arm(watch: Any, submission: str) -> None:
    global _state
    _wrap_array_types()  # subclasses of ndarray made since the last request (at import, say)
    _state = (watch, submission, threading.get_ident())


def disarm() -> None:
    global _state
    state, _state = _state, None
    if state is not None:
        for kind in _wrap_array_types():  # a subclass made while the request ran: its arrays went unseen
            state[0].mode.calls.setdefault(f"{ARRAYS}numpy.ndarray subclass {kind.__qualname__}", "while it ran")


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


#: Where ``tp_alloc`` sits in a type object, in pointer-sized fields (CPython 3.8 to 3.13, release builds:
#: the object header, then ``tp_name`` ... ``tp_init`` in the order of Include/cpython/object.h); checked
#: against ``tp_basicsize`` and ``PyType_GenericAlloc`` before anything is written.
_TP_BASICSIZE, _TP_ALLOC = 4, 38
_GENERIC = ctypes.cast(ctypes.pythonapi.PyType_GenericAlloc, ctypes.c_void_p).value
_alloc: list[int] = []  # the wrapper's address, once made


def watch_numpy_arrays() -> bool:
    """Wrap ``tp_alloc`` of numpy's ndarray and of its subclasses, so that every array object made in this
    process, a view or an array over foreign memory too, is seen (``_allocated``). A subclass made later
    gets ``PyType_GenericAlloc`` of its own (CPython sets it for every class a ``class`` statement makes):
    each request wraps those made since (``arm``), and one made while a request runs is recorded as such
    (``disarm``). False where numpy is absent or its types are not laid out as this expects (then
    nothing is written)."""
    if _alloc:
        return True
    try:
        import numpy
    except ImportError:
        return False
    word = ctypes.sizeof(ctypes.c_void_p)
    if ctypes.c_ssize_t.from_address(id(numpy.ndarray) + _TP_BASICSIZE * word).value != numpy.ndarray.__basicsize__ \
            or ctypes.c_void_p.from_address(id(numpy.ndarray) + _TP_ALLOC * word).value != _GENERIC:
        return False
    # (PYFUNCTYPE: called with the GIL held; it must not be let go in the middle of making an object)
    real = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ssize_t)(_GENERIC)

    def made(kind: int, items: int) -> int | None:
        if _state is not None:
            with contextlib.suppress(BaseException):
                _allocated(sys._getframe(1))
        return real(kind, items)

    callback = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ssize_t)(made)
    _keep.extend((real, callback))
    _alloc.append(ctypes.cast(callback, ctypes.c_void_p).value)
    _wrap_array_types()
    return True


def _wrap_array_types() -> list[type]:
    """Give ndarray and each of its subclasses still on CPython's allocator the wrapper; return those."""
    numpy = sys.modules.get("numpy")
    if not _alloc or numpy is None:
        return []
    word, wrapped, kinds, seen = ctypes.sizeof(ctypes.c_void_p), [], [numpy.ndarray], set()
    while kinds:
        kind = kinds.pop()
        if id(kind) in seen:
            continue
        seen.add(id(kind))
        kinds.extend(type.__subclasses__(kind))
        slot = ctypes.c_void_p.from_address(id(kind) + _TP_ALLOC * word)
        if slot.value == _GENERIC and ctypes.c_ssize_t.from_address(id(kind) + _TP_BASICSIZE * word).value \
                == kind.__basicsize__:
            slot.value = _alloc[0]
            wrapped.append(kind)
    return wrapped


def watch_threads() -> None:
    """Start every later thread of this process with the profile hook: ``threading``'s and ``_thread``'s
    own (a student's thread started at import is the one the probe's windows do not cover)."""
    import _thread

    def hooked(start: Callable) -> Callable:
        def started(function: Callable, *args: Any, **kwargs: Any) -> Any:
            def run(*a: Any, **k: Any) -> Any:
                sys.setprofile(profile)
                return function(*a, **k)
            return start(run, *args, **kwargs)
        started.__wrapped_start__ = start  # type: ignore[attr-defined]
        return started

    for module in (_thread, threading):
        for name in ("start_new_thread", "_start_new_thread", "start_joinable_thread", "_start_joinable_thread"):
            start = getattr(module, name, None)
            if start is not None and not hasattr(start, "__wrapped_start__"):
                setattr(module, name, hooked(start))


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
        name = _library(getattr(arg, "__module__", None)) or (  # a module's function, a type's (__new__), a method
            _library(owner) if isinstance(owner, type(sys)) else _library(getattr(owner, "__module__", None))
            if isinstance(owner, type) else _library(type(owner).__module__))
        if name is not None:
            _record(state, frame, f"{name}.{getattr(arg, '__qualname__', None) or getattr(arg, '__name__', '?')}")
    except Exception:
        pass
