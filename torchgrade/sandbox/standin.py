"""A stand-in for CUDA on a machine without it: tensors that are "on cuda:0" for placement, with CPU values.

On a machine without CUDA the CUDA variant of a check runs its probe on stand-in tensors: a
``StandIn`` holds a real CPU tensor (so ``.item()``, ``int(x.max())`` and data-dependent shapes work)
and says ``cuda:0`` to Python (``x.device``, ``x.is_cuda``), so ``torch.zeros(n, device=x.device)``
lands on the stand-in and ``torch.zeros(n)`` on the CPU, as they would on a GPU. Every operator
goes through ``_run`` (a ``__torch_dispatch__`` handler), which applies CUDA's placement rules
before computing on the CPU values:

- tensors of one operator must be on one device, except CPU tensors of zero dimensions (Python
  numbers and ``torch.tensor(2.0)``) as inputs: the rule TensorIterator applies and
  ``torch._subclasses.fake_tensor`` models; an output (the tensor an in-place op writes) is never
  exempt;
- ``copy_`` (``y[i] = x``, ``y.copy_(x)``) and ``.to()``/``.cpu()``/``.cuda()`` cross devices; ``p.data = q``
  (what ``module.to(dtype)`` does) gives a stand-in tensor ``q``'s values too;
- a view of a normal tensor made under ``inference_mode`` is a normal tensor, as torch makes it;
- an indexed tensor on the GPU takes CPU indices (``x[cpu_index]``, ``x[mask] = v``), not the
  other way round;
- ``.numpy()`` (and ``np.asarray``) of a tensor on the GPU raises TypeError as torch does.

Where a rule is in doubt it is the more lenient one: the stand-in may miss a mistake a GPU would
show, never report one a GPU would not. What it cannot do (an in-place op that changes a tensor's
shape, ``.data =`` across devices) is recorded in ``unsupported`` and the check is set aside.

Why not the alternatives (torch 2.13, see docs/devices.md): ``meta`` tensors have no values
(``int(labels.max())`` raises, so the corpus's ``one_hot`` could not be graded) and report
``meta``, not ``cuda``; ``FakeTensorMode`` tensors claiming ``cuda`` raise on any data-dependent
value and abort the process (a C++ ``terminate``) on a backward pass, as autograd asks CUDA's
device guard about them. A StandIn is ``meta`` to C++ (whose device guard exists on every build),
so autograd runs as on the CPU, each operator of the backward pass coming through ``_run`` too.
"""

from __future__ import annotations

import contextlib
import copy
import linecache
import operator
import os
import sys
import threading
from itertools import repeat
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
#: What a stand-in tensor says its device is.
DEVICE = torch.device("cuda", 0)
#: The words of CUDA's own error for tensors on two devices (torch's message, as a GPU shows it).
MIXED = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
INDEX_MIXED = "indices should be either on cpu or on the same device as the indexed tensor (cpu)"
#: What torch raises for torch.cuda.* where there is no CUDA (the stand-in does not model torch.cuda's API).
NO_CUDA = "Torch not compiled with CUDA enabled"
#: What torch.cuda raises where there is no GPU: a CPU build's NO_CUDA; a CUDA build's (the default wheel on
#: Linux) on a machine without a driver, or without a device.
NO_CUDA_MESSAGES = (NO_CUDA, "Found no NVIDIA driver on your system", "No CUDA GPUs are available")
CALLS_CUDA = "the code calls torch.cuda itself (a random state, a stream, a synchronisation), which needs a real GPU"
NUMPY = "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."

#: Operators that cross devices by design.
_CROSSING = (aten.copy_.default, aten._to_copy.default, aten._foreach_copy_.default, aten._copy_from.default,
             aten._copy_from_and_resize.default)
#: Operators whose index tensors may be on the CPU when the indexed tensor is on the GPU.
_INDEXING = (aten.index.Tensor, aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default,
             aten._unsafe_index.Tensor, aten._unsafe_index_put.default)
_TO_COPY = aten._to_copy.default
_SETS = (aten.set_.source_Tensor, aten.set_.source_Storage, aten.set_.source_Storage_storage_offset)
#: An operator's kind (`_operator`).
_PLAIN, _CROSSES, _INDEXES, _SETS_STORAGE = range(4)

_state = threading.local()


class StandIn(torch.Tensor):
    """A tensor "on cuda:0" whose values are a CPU tensor (`value`); C++ sees a meta tensor."""

    value: torch.Tensor

    @staticmethod
    def __new__(cls, value: torch.Tensor, requires_grad: bool = False) -> "StandIn":
        made = torch.Tensor._make_wrapper_subclass(
            cls, value.shape, strides=value.stride(), storage_offset=value.storage_offset(), dtype=value.dtype,
            device="meta", requires_grad=requires_grad)
        made.value = value
        return made

    __torch_function__ = torch._C._disabled_torch_function_impl
    device = property(lambda self: DEVICE)
    is_cuda = property(lambda self: True)
    is_cpu = property(lambda self: False)
    is_meta = property(lambda self: False)

    def get_device(self) -> int:
        return 0

    def numpy(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(NUMPY)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(NUMPY)

    def untyped_storage(self) -> torch.UntypedStorage:  # storage identity (views share it) as on a GPU
        return self.value.untyped_storage()

    def data_ptr(self) -> int:
        return self.value.data_ptr()

    def tolist(self) -> Any:
        return self.value.tolist()

    def __deepcopy__(self, memo: dict) -> "StandIn":
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
                               "because of a torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        made = memo[id(self)] = StandIn(copy.deepcopy(self.value, memo), requires_grad=self.requires_grad)
        made.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items() if k != "value"})
        if self.grad is not None:
            made.grad = copy.deepcopy(self.grad, memo)
        return made

    def __format__(self, spec: str) -> str:
        return self.value.__format__(spec) if self.dim() == 0 else object.__format__(self, spec)

    def __repr__(self, *args: Any, **kwargs: Any) -> str:
        text = repr(self.value)
        extra = f", device='{DEVICE}'"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return text[:-1] + extra + ")"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        return _run(func, args, kwargs or {})


class Unsupported(RuntimeError):
    """An operation the stand-in cannot model; the check that met it is set aside."""


def on_standin(device: Any) -> bool:
    """Whether a `device=` argument names the stand-in (CUDA, or meta: what a StandIn is to C++)."""
    if device is None:
        return False
    device = torch.device(device) if not isinstance(device, torch.device) else device
    return device.type in ("cuda", "meta")


def _where(t: torch.Tensor) -> str:
    return "cuda" if type(t) is StandIn else t.device.type


def _plain(x: Any) -> Any:
    return x.value if type(x) is StandIn else x


def _tensors(args: Any, found: list | None = None) -> list[torch.Tensor]:
    """The tensors in an operator's arguments (lists, tuples and dicts of them; pytree is 10x slower here).

    One loop per container, not one call per argument: it runs several times for every operator."""
    found = [] if found is None else found
    kind = type(args)
    if kind is dict:
        args = args.values()
    elif kind is not list and kind is not tuple:
        if isinstance(args, torch.Tensor):
            found.append(args)
        return found
    for a in args:
        kind = type(a)
        if kind is list or kind is tuple or kind is dict:
            _tensors(a, found)
        elif isinstance(a, torch.Tensor):
            found.append(a)
    return found


def _mapped(value: Any, fn: Any) -> Any:
    """`value` with `fn` applied to each tensor in it (lists, tuples, dicts); one loop per container."""
    kind = type(value)
    if kind is list or kind is tuple:
        out = []
        for v in value:
            inner = type(v)
            if inner is list or inner is tuple or inner is dict:
                out.append(_mapped(v, fn))
            else:
                out.append(fn(v) if isinstance(v, torch.Tensor) else v)
        return out if kind is list else tuple(out)
    if kind is dict:
        return {k: _mapped(v, fn) for k, v in value.items()}
    return fn(value) if isinstance(value, torch.Tensor) else value


def _unwrapped(value: Any) -> Any:
    """`value` with each stand-in tensor replaced by its CPU values (`_mapped` with `_plain`, without a call per
    tensor: it runs for every operator's arguments)."""
    kind = type(value)
    if kind is list or kind is tuple:
        out = []
        for v in value:
            inner = type(v)
            out.append(v.value if inner is StandIn else _unwrapped(v) if inner is list or inner is tuple or inner is dict
                       else v)
        return out if kind is list else tuple(out)
    if kind is dict:
        return {k: _unwrapped(v) for k, v in value.items()}
    return value.value if kind is StandIn else value


def _common(func: Any, tensors: list[torch.Tensor]) -> str | None:
    """The device an operator runs on, by CUDA's rules, or RuntimeError as CUDA raises it."""
    common, scalar = None, False
    for t in tensors:
        where = "cuda" if type(t) is StandIn else t.device.type  # (`_where`, inlined: it runs for every operator)
        is_scalar = where == "cpu" and t.dim() == 0
        if common is None:
            common, scalar = where, is_scalar
        elif where == common:
            scalar = scalar and is_scalar
        elif is_scalar:
            continue
        elif scalar:
            common, scalar = where, is_scalar
        else:
            raise _mixed(MIXED, tensors)
    return common


def _mixed(message: str, tensors: list[torch.Tensor]) -> RuntimeError:
    """CUDA's error for tensors on two devices; the student's line that made the CPU one is kept (`blamed`)."""
    found = next((origin(t) for t in tensors if _where(t) == "cpu" and origin(t)), None)
    if found and getattr(_state, "locate", None) is not None:
        _state.blamed = found
    return RuntimeError(message)


def blamed() -> str | None:
    """The student's line that made the CPU tensor of the last device error inside ``active(own=...)``."""
    return getattr(_state, "blamed", None)


#: Each operator's (kind, the arguments it writes, whether it is a view), by its C++ handle (``func._op``, a
#: builtin: hashed in C, where an OpOverload's own hash is Python code and id() an audited event).
_OPERATORS: dict[Any, tuple[int, tuple[tuple[int, str], ...], bool]] = {}


def _operator(func: Any) -> tuple[int, tuple[tuple[int, str], ...], bool]:
    """What `_run` needs to know of an operator, worked out once."""
    handle = getattr(func, "_op", func)
    known = _OPERATORS.get(handle)
    if known is None:
        kind = _CROSSES if any(func is op for op in _CROSSING) else _INDEXES if any(func is op for op in _INDEXING) \
            else _SETS_STORAGE if any(func is op for op in _SETS) else _PLAIN
        writes = tuple((i, a.name) for i, a in enumerate(func._schema.arguments)
                       if a.alias_info is not None and a.alias_info.is_write)
        known = _OPERATORS[handle] = (kind, writes, bool(getattr(func, "is_view", False)))
    return known


def _written(writes: tuple[tuple[int, str], ...], args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an operator writes (self of an in-place op, out=)."""
    found: list[torch.Tensor] = []
    for i, name in writes:
        _tensors(args[i] if i < len(args) else kwargs.get(name), found)
    return found


def _run(func: Any, args: tuple, kwargs: dict, tensors: list[torch.Tensor] | None = None) -> Any:
    """Run one operator by CUDA's placement rules on the CPU values; wrap what lands on the stand-in.

    A placement error is raised as CUDA raises it; an error of the operator itself (a shape that does not
    fit) as the operator raises it; anything else that goes wrong here is the stand-in's, not the
    student's, and sets the check aside (`Unsupported`). `tensors`: those of the arguments, where known."""
    try:
        if tensors is None:
            tensors = _tensors(args)
            if kwargs:
                _tensors(kwargs, tensors)
        kind, writes, is_view = _operator(func)
        written = _written(writes, args, kwargs) if writes else []
        there, plain_args, plain_kwargs = _place(func, kind, args, kwargs, tensors, written)
    except Unsupported:
        raise
    except RuntimeError as e:
        if str(e) in (MIXED, INDEX_MIXED):
            raise
        raise _unsupported(f"{func} ({type(e).__name__}: {e})") from None
    except Exception as e:
        raise _unsupported(f"{func} ({type(e).__name__}: {e})") from None
    out = func(*plain_args, **plain_kwargs)
    try:
        base = args[0] if is_view and args and isinstance(args[0], torch.Tensor) else None
        return _wrap(out, there, written, base)
    except Unsupported:
        raise
    except Exception as e:
        raise _unsupported(f"{func} ({type(e).__name__}: {e})") from None


def _place(func: Any, kind: int, args: tuple, kwargs: dict, tensors: list[torch.Tensor],
           written: list[torch.Tensor]) -> tuple[str | None, Any, Any]:
    """Where an operator's results go ("cuda": the stand-in), and its arguments with CPU values."""
    device = kwargs.get("device")
    to_standin = device is not None and on_standin(device)
    plain_args, plain_kwargs = _unwrapped(args), (_unwrapped(kwargs) if kwargs else {})
    if kind == _CROSSES:
        if func is _TO_COPY:
            there = "cuda" if to_standin else (_where(args[0]) if device is None else torch.device(device).type)
            if device is not None:
                plain_kwargs["device"] = torch.device("cpu")
        else:  # a copy writes into its destination, wherever that is
            there = None
    else:
        if to_standin:
            plain_kwargs["device"] = torch.device("cpu")
        if kind == _INDEXES:
            there = _indexed(func, args, kwargs)
        else:
            there = _common(func, tensors)
        if to_standin and there is None:  # a factory function with device="cuda"
            there = "cuda"
        for t in written:
            if _where(t) != there and there is not None and not (kind == _INDEXES and t is not args[0]):
                raise _mixed(MIXED, tensors)
    if kind == _SETS_STORAGE and any(map(operator.is_, map(type, tensors), repeat(StandIn))):
        raise _unsupported(f"{func}")
    return there, plain_args, plain_kwargs


def _wrap(out: Any, there: str | None, writes: list[torch.Tensor], view_of: torch.Tensor | None = None) -> Any:
    """The operator's results: what lands on the stand-in wrapped, a written argument (`writes`) as itself;
    `view_of`: the tensor a view operator's results are views of."""
    for t in writes:
        if type(t) is StandIn and (t.shape != t.value.shape or t.stride() != t.value.stride()
                                   or t.storage_offset() != t.value.storage_offset()):
            # squeeze_, t_, resize_...: the stand-in tensor (a meta tensor to C++) takes its values' new shape
            with torch._C._DisableTorchDispatch():
                aten.as_strided_.default(t, t.value.shape, t.value.stride(), t.value.storage_offset())

    def wrap(o: Any) -> Any:
        if not isinstance(o, torch.Tensor):
            return o
        for t in writes:  # (identity, not id(): id() is an audited event, so a call of the sandbox's hook)
            if _plain(t) is o:
                return t
        if there != "cuda":
            return o
        if view_of_normal:
            # a view of a normal tensor made under inference_mode is a normal tensor (torch's rule): made as
            # an inference tensor, autograd could not give it its base's version counter (a GPU has no such error)
            with torch.inference_mode(False):
                return StandIn(o)
        return StandIn(o)

    view_of_normal = view_of is not None and torch.is_inference_mode_enabled() and not view_of.is_inference()
    return _mapped(out, wrap)


def _indexed(func: Any, args: tuple, kwargs: dict) -> str | None:
    """x[indices]: indices may stay on the CPU for x on the GPU; a value put must be on x's device."""
    self = args[0]
    where = _where(self)
    indices = _tensors(args[1] if len(args) > 1 else kwargs.get("indices"))
    if where == "cpu" and any(_where(i) != "cpu" for i in indices):
        raise _mixed(INDEX_MIXED, [self])
    rest = [self] + _tensors(args[2:]) + _tensors({k: v for k, v in kwargs.items() if k != "indices"})
    return _common(func, rest)


def _unsupported(what: str) -> Unsupported:
    reasons = getattr(_state, "unsupported", None)
    if reasons is not None:
        reasons.append(what)
    return Unsupported(f"the CUDA stand-in cannot model {what}")


class _Dispatch(TorchDispatchMode):
    """Every operator, including factory functions with ``device="cuda"`` (no StandIn argument)."""

    def __init__(self) -> None:
        super().__init__()
        # Registered as torch's fake-tensor mode: while it is on, torch skips its CUDA initialisation
        # for device="cuda" arguments (torch/csrc/utils/device_lazy_init.cpp), as for fake tensors.
        self._mode_key = torch._C._TorchDispatchModeKey.FAKE

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # no torch.compile wrapper around every operator: it costs 10 us each
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        kwargs = kwargs or {}
        tensors = _tensors(args)
        if kwargs:
            _tensors(kwargs, tensors)
        device = kwargs.get("device")
        # (a stand-in tensor among them, by identity of type, in C: no generator's frame, nobody's __eq__)
        if any(map(operator.is_, map(type, tensors), repeat(StandIn))) or (device is not None and on_standin(device)):
            return _run(func, args, kwargs, tensors)
        out = func(*args, **kwargs)
        if getattr(_state, "locate", None) is not None:
            with contextlib.suppress(Exception):  # (only to say where, in a message)
                _remember_origin(tensors, out)
        return out


#: The attribute of a CPU tensor that holds the student's line that made it (see `origin`).
_ORIGIN = "_torchgrade_made_at"


def _remember_origin(tensors: list[torch.Tensor], out: Any) -> None:
    """Where the student's CPU tensors were made (a factory function, or computed from such a tensor)."""
    known = next((getattr(t, _ORIGIN) for t in tensors if hasattr(t, _ORIGIN)), None)
    if known is None and not tensors and isinstance(out, torch.Tensor) and out.dim() > 0:
        known = _state.locate()
    if known is not None:
        for o in _tensors(out):
            setattr(o, _ORIGIN, known)


def _index_of(device: Any) -> Any:
    """``"cuda"`` -> ``cuda:0``: torch's ``Tensor.to`` asks CUDA's device guard for the current index."""
    if isinstance(device, (str, torch.device)):
        d = torch.device(device)
        if d.type == "cuda" and d.index is None:
            return DEVICE
    return device


class _Functions(TorchFunctionMode):
    """``.to("cuda")`` and ``.cuda()`` as on a GPU: to the stand-in, and no copy when already there."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        kwargs = kwargs or {}
        if getattr(func, "__self__", None) is _DATA and func.__name__ == "__set__":
            return _set_data(*args)
        if func is torch.Tensor.cuda or func is torch.Tensor.to:
            self_, rest = args[0], args[1:]
            if func is torch.Tensor.cuda:
                rest, kwargs = (DEVICE,), {k: v for k, v in kwargs.items() if k in ("non_blocking", "memory_format")}
            else:
                rest = tuple(_index_of(a) for a in rest)
                if "device" in kwargs:
                    kwargs = {**kwargs, "device": _index_of(kwargs["device"])}
            target, dtype, _, memory_format = torch._C._nn._parse_to(*rest, **kwargs)
            if type(self_) is StandIn and (target is None or on_standin(target)) and not kwargs.get("copy") \
                    and (dtype is None or dtype == self_.dtype) \
                    and memory_format in (None, torch.preserve_format):
                return self_  # already there: .to() returns the tensor itself, as on a GPU
            return func(self_, *rest, **kwargs)
        if func is torch.Tensor.new_tensor and type(args[0]) is StandIn and kwargs.get("device") is None:
            kwargs = {**kwargs, "device": DEVICE}  # (new_tensor's device is its tensor's, not meta's)
        if func in _FROM_DATA and on_standin(kwargs.get("device")):
            # torch builds these on the CPU and moves them in C++, out of the dispatcher's sight
            rest = {k: v for k, v in kwargs.items() if k not in ("device", "requires_grad")}
            data = args[1] if func is torch.Tensor.new_tensor else args[0]
            if type(data) is StandIn and func is not torch.tensor:
                made = data if rest.get("dtype") in (None, data.dtype) else data.to(rest["dtype"])
            elif func is torch.Tensor.new_tensor:  # (of a StandIn, torch would make a meta tensor)
                made = to_standin(torch.tensor(data, **{"dtype": args[0].dtype, **rest}))
            else:
                made = to_standin(func(*args, **rest))
            return made.requires_grad_() if kwargs.get("requires_grad") else made
        if "device" in kwargs:
            kwargs = {**kwargs, "device": _index_of(kwargs["device"])}
        return func(*args, **kwargs)


_FROM_DATA = {torch.tensor, torch.as_tensor, torch.asarray, torch.Tensor.new_tensor}
_DATA = torch._C.TensorBase.__dict__["data"]


def _set_data(tensor: torch.Tensor, data: torch.Tensor) -> None:
    """``tensor.data = data`` (what ``module.to(dtype)``, ``.double()`` and ``.half()`` do to each parameter):
    a stand-in tensor takes its new values too, or it would say float64 and compute in float32."""
    if (type(tensor) is StandIn) != (type(data) is StandIn):
        raise _unsupported("`.data =` with a tensor on another device")
    _DATA.__set__(tensor, data)
    if type(tensor) is StandIn:
        tensor.value = data.value


def no_cuda(message: str) -> bool:
    """Whether an exception's message is torch.cuda saying there is no GPU (whatever torch's build)."""
    return any(text in message for text in NO_CUDA_MESSAGES)


@contextlib.contextmanager
def active(own: str | None = None) -> Iterator[list[str]]:
    """Inside: ``device="cuda"`` makes stand-in tensors. Yields the list of what it could not model.

    `own`: the folder of the student's files; then each CPU tensor made by a factory function (and
    what is computed from it on the CPU) remembers the student's line that made it (`origin`)."""
    if getattr(_state, "unsupported", None) is not None:  # already on (a check's inputs, then its probe)
        yield _state.unsupported
        return
    reasons: list[str] = []
    _state.unsupported = reasons
    _state.locate = (lambda: _student_line(own)) if own else None
    _state.blamed = None
    try:
        with _Functions(), _Dispatch():
            yield reasons
    finally:
        _state.unsupported = _state.locate = _state.blamed = None


def _student_line(folder: str) -> str | None:
    """``conv.py, line 12: Y = torch.zeros(...)``: the innermost frame in the student's files."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(folder):
            line = linecache.getline(filename, frame.f_lineno).strip()
            return f"{os.path.basename(filename)}, line {frame.f_lineno}: {line}"
        frame = frame.f_back
    return None


def origin(value: torch.Tensor) -> str | None:
    """The student's line that made this CPU tensor (inside ``active(own=...)``), or None."""
    return getattr(value, _ORIGIN, None)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """The stand-in off for a while (storages built from bytes would be meta storages under it)."""
    if getattr(_state, "unsupported", None) is None:  # not on in this thread: nothing to do
        yield
        return
    with torch.utils._python_dispatch._disable_current_modes():
        yield


def to_standin(value: Any) -> Any:
    """A CPU tensor as a stand-in tensor (a leaf that requires grad if it did), anything else as it is."""
    if type(value) is StandIn or not isinstance(value, torch.Tensor):
        return value
    return StandIn(value.detach(), requires_grad=value.requires_grad)


def plain(value: torch.Tensor) -> torch.Tensor:
    """A stand-in tensor's CPU values (a plain tensor as it is)."""
    return value.value if type(value) is StandIn else value
