"""Plain data across the trust boundary: msgpack, with tensors as their raw storage bytes.

A frame is msgpack of ``[storages, tree]``. ``tree`` holds the value: msgpack's own types (None,
bool, int, float, str, bytes, list, dict) and extension types for what msgpack lacks (tuple,
torch.Size, complex, dtype, device, tensor). A tensor is its dtype, shape, strides, offset, device,
requires_grad and the index of its storage in ``storages``; tensors that shared a storage share it
again on the other side, views and strides kept.

Decoding builds nothing but those types: msgpack runs no code and knows no classes, so a reply
cannot name a class of the student's, a tensor subclass or a global, and every tensor is made
here, by ``Tensor.set_`` on a fresh storage, after its dtype, device, size and bounds are checked.
(``torch.save`` with a weights-only load did the same job at ten times the cost, which showed in
every check.)
"""

from __future__ import annotations

import struct
from typing import Any, Callable

import msgpack
import torch

from torchgrade.sandbox.standin import StandIn, suspended

#: The largest frame either side accepts (a reply bigger than this is refused, not buffered).
MAX_FRAME_BYTES = 256 * 1024 * 1024
#: How deep nested containers may go before a reply is refused.
MAX_DEPTH = 32
#: How many values (containers, tensors, scalars) a reply may hold.
MAX_ITEMS = 1_000_000
#: The most elements one tensor may claim (strides of zero make a huge tensor from one number).
MAX_ELEMENTS = 2**31

_TUPLE, _SIZE, _COMPLEX, _DTYPE, _DEVICE, _TENSOR = range(1, 7)
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)}
_SCALARS = (str, int, float, bool, complex, bytes, type(None), torch.dtype, torch.device)


class WireError(Exception):
    """A frame that is not plain data (a tensor subclass, an object, too big or too deep)."""


# --- out ---------------------------------------------------------------------------------------

def encode(obj: Any) -> bytes:
    """Serialise plain data: tensors (dense, exact ``torch.Tensor``), numbers, strings, bytes, None,
    lists, tuples, dicts, dtypes and devices. WireError for anything else (dict keys other than str
    and int are refused when decoded)."""
    storages: list[bytes] = []
    seen: dict[tuple, int] = {}

    def pack(value: Any) -> bytes:
        return msgpack.packb(value, default=default, strict_types=True, use_bin_type=True)

    def default(value: Any) -> msgpack.ExtType:
        kind = type(value)
        if kind is tuple:
            return msgpack.ExtType(_TUPLE, pack(list(value)))
        if kind is torch.Size:
            return msgpack.ExtType(_SIZE, pack(list(value)))
        if kind is complex:
            return msgpack.ExtType(_COMPLEX, struct.pack("<dd", value.real, value.imag))
        if kind is torch.dtype:
            return msgpack.ExtType(_DTYPE, str(value).removeprefix("torch.").encode())
        if kind is torch.device:
            return msgpack.ExtType(_DEVICE, str(value).encode())
        if kind is torch.Tensor or kind is StandIn:  # a stand-in tensor travels as the CUDA tensor it stands for
            return msgpack.ExtType(_TENSOR, pack(_describe_tensor(value, storages, seen)))
        if isinstance(value, torch.Tensor):
            what = "a Parameter" if isinstance(value, torch.nn.Parameter) else "a tensor subclass"
            raise WireError(f"{what} ({kind.__module__}.{kind.__qualname__}) is not plain data; send a torch.Tensor")
        raise WireError(f"a {kind.__module__}.{kind.__qualname__} is not plain data")

    try:
        tree = pack(obj)
        return msgpack.packb([storages, tree], use_bin_type=True)
    except (OverflowError, ValueError, TypeError) as e:  # an int beyond 64 bits, too deep a nesting
        raise WireError(f"not plain data ({e})") from None


def join(frame: bytes, extra: dict) -> bytes:
    """A frame of a dict with `extra`'s items (text, numbers: no tensors) added to it. The frame's storages
    and tensors are kept as they were encoded: no tensor is read again."""
    storages, tree = msgpack.unpackb(frame, raw=False, use_list=True)
    value = msgpack.unpackb(tree, raw=False, strict_map_key=False, ext_hook=msgpack.ExtType)
    value.update(extra)
    return msgpack.packb([storages, msgpack.packb(value, use_bin_type=True, strict_types=True)], use_bin_type=True)


def _describe_tensor(t: torch.Tensor, storages: list[bytes], seen: dict[tuple, int]) -> list:
    _check_tensor(t)
    if t.is_conj() or t.is_neg():  # lazy bits the storage's bytes do not show
        t = t.resolve_conj().resolve_neg()
    if str(t.dtype).removeprefix("torch.") not in _DTYPES:
        raise WireError(f"a tensor of dtype {t.dtype} is not compared by the grader")
    storage = t.untyped_storage()
    key = (t.device.type, t.device.index, storage.data_ptr(), storage.nbytes())
    index = seen.get(key)
    if index is None:
        data = storage if storage.device.type == "cpu" else storage.cpu()
        index = seen[key] = len(storages)
        storages.append(bytes(torch.empty(0, dtype=torch.uint8).set_(data).numpy()) if data.nbytes() else b"")
    return [str(t.dtype).removeprefix("torch."), list(t.shape), list(t.stride()), t.storage_offset(),
            index, str(t.device), t.requires_grad]


# --- in ----------------------------------------------------------------------------------------

def decode(frame: bytes) -> Any:
    """Load a frame (from either side) into plain data; WireError for anything else."""
    if len(frame) > MAX_FRAME_BYTES:
        raise WireError(f"reply of {len(frame)} bytes exceeds the {MAX_FRAME_BYTES} byte limit")
    try:
        outer = msgpack.unpackb(frame, raw=False, use_list=True, strict_map_key=True)
        if type(outer) is not list or len(outer) != 2 or type(outer[0]) is not list \
                or any(type(s) is not bytes for s in outer[0]) or type(outer[1]) is not bytes:
            raise WireError("a frame is [storages, value]")
        with suspended():  # tensors are built here, on the CPU (a stand-in's values too), whatever mode is on
            obj = msgpack.unpackb(outer[1], raw=False, use_list=True, strict_map_key=False,
                                  ext_hook=_ext_hook(outer[0], {}))
    except WireError as e:
        raise WireError(f"reply is not plain data ({e})") from None
    except Exception as e:  # not msgpack, a bad extension, a tensor that does not fit its storage
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WireError(f"reply is not plain data ({first_line[:200]})") from None
    check_plain(obj)
    return obj


def _ext_hook(storages: list[bytes], made: dict[tuple, torch.UntypedStorage]) -> Callable[[int, bytes], Any]:
    def hook(code: int, data: bytes) -> Any:
        if code in (_TUPLE, _SIZE):
            items = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=hook)
            if type(items) is not list:
                raise WireError("a tuple is a list of items")
            return tuple(items) if code == _TUPLE else torch.Size(_ints(items, "a size"))
        if code == _COMPLEX:
            return complex(*struct.unpack("<dd", data))
        if code == _DTYPE:
            return _dtype(data.decode())
        if code == _DEVICE:
            return torch.device(data.decode())  # a value, of any device type: no tensor is put there
        if code == _TENSOR:
            return _tensor(msgpack.unpackb(data, raw=False), storages, made)
        raise WireError(f"unknown extension type {code}")

    return hook


def _dtype(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise WireError(f"unknown dtype {name!r}")
    return _DTYPES[name]


def _device(name: str) -> torch.device:
    """Where a tensor is rebuilt: the CPU or CUDA, as the comparisons take."""
    device = torch.device(name)
    if device.type not in ("cpu", "cuda"):
        raise WireError(f"a tensor on a device of type {device.type} is not compared by the grader")
    return device


def _stand_in(device: torch.device) -> bool:
    """A CUDA tensor arriving where there is no CUDA is rebuilt on the CUDA stand-in (torchgrade.standin):
    CPU values, "cuda:0" for placement. Only a check graded on the stand-in sends one here."""
    return device.type == "cuda" and not torch.cuda.is_available()


def _ints(values: Any, what: str) -> list[int]:
    if type(values) is not list or any(type(v) is not int or v < 0 for v in values):
        raise WireError(f"{what} is a list of counts")
    return values


def _tensor(fields: Any, storages: list[bytes], made: dict[tuple, torch.UntypedStorage]) -> torch.Tensor:
    if type(fields) is not list or len(fields) != 7:
        raise WireError("a tensor is [dtype, shape, strides, offset, storage, device, requires_grad]")
    dtype_name, shape, stride, offset, index, device_name, requires_grad = fields
    dtype, device = _dtype(dtype_name), _device(device_name)
    shape, stride = _ints(shape, "a shape"), _ints(stride, "strides")
    if len(shape) != len(stride) or type(offset) is not int or offset < 0 or type(requires_grad) is not bool \
            or type(index) is not int or not 0 <= index < len(storages):
        raise WireError("a tensor's fields do not fit together")
    numel = 1
    for size in shape:
        numel *= size
    if numel > MAX_ELEMENTS:
        raise WireError(f"a tensor of {numel} elements (the limit is {MAX_ELEMENTS})")
    if numel:  # set_ would grow a storage that is too small, with bytes from nowhere
        last = offset + sum((size - 1) * step for size, step in zip(shape, stride))
        if (last + 1) * dtype.itemsize > len(storages[index]):
            raise WireError(f"a tensor reaches out of bounds of its storage of {len(storages[index])} bytes")
    stand_in = _stand_in(device)
    storage = made.get((index, device))
    if storage is None:
        storage = torch.UntypedStorage.from_buffer(storages[index], dtype=torch.uint8) if storages[index] \
            else torch.UntypedStorage(0)
        storage = made[(index, device)] = storage if device.type == "cpu" or stand_in else storage.to(device=device)
    if stand_in:
        return StandIn(torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride), requires_grad=requires_grad)
    tensor = torch.empty(0, dtype=dtype, device=device).set_(storage, offset, shape, stride)
    return tensor.requires_grad_() if requires_grad else tensor


def check_plain(obj: Any, depth: int = 0, budget: list[int] | None = None) -> None:
    """Raise WireError unless obj is built only from plain types and exact, ordinary torch.Tensors."""
    if budget is None:
        budget = [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0:
        raise WireError(f"reply holds more than {MAX_ITEMS} values")
    if depth > MAX_DEPTH:
        raise WireError(f"reply nests deeper than {MAX_DEPTH} levels")
    kind = type(obj)
    if kind is torch.Tensor or kind is StandIn:
        _check_tensor(obj)
        return
    if kind in _SCALARS or kind is torch.Size:
        return
    if kind in (list, tuple):
        for item in obj:
            check_plain(item, depth + 1, budget)
        return
    if kind is dict:
        for key, value in obj.items():
            if type(key) not in (str, int):
                raise WireError(f"reply has a dict key of type {type(key).__name__}")
            check_plain(value, depth + 1, budget)
        return
    raise WireError(f"reply contains a {kind.__module__}.{kind.__qualname__}, which is not plain data")


def _check_tensor(t: torch.Tensor) -> None:
    """Only dense tensors of numbers on a real device: what a comparison can take without surprises."""
    if t.layout is not torch.strided:
        raise WireError(f"a tensor with layout {t.layout}; send a dense (strided) tensor")
    if t.is_quantized or t.device.type not in ("cpu", "cuda"):
        raise WireError(f"a {'quantized ' if t.is_quantized else ''}tensor on {t.device.type}, "
                        "which the grader does not compare")
    if t.numel() > MAX_ELEMENTS:
        raise WireError(f"a tensor of {t.numel()} elements (the limit is {MAX_ELEMENTS})")
