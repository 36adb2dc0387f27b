"""Plain data across the trust boundary: ``torch.save`` out, a weights-only load in."""

from __future__ import annotations

import io
from typing import Any

import torch

#: The largest frame either side accepts (a reply bigger than this is refused, not buffered).
MAX_FRAME_BYTES = 256 * 1024 * 1024
#: How deep nested containers may go before a reply is refused.
MAX_DEPTH = 32
#: How many values (containers, tensors, scalars) a reply may hold: shared references make a small
#: frame stand for an enormous tree (``x = [x, x]`` thirty times), so this counts what is walked.
MAX_ITEMS = 1_000_000
#: The most elements one tensor may claim (strides of zero make a huge tensor from one number).
MAX_ELEMENTS = 2**31

_SCALARS = (str, int, float, bool, complex, bytes, type(None), torch.dtype, torch.device)


class WireError(Exception):
    """A frame that is not plain data (a tensor subclass, an object, too big or too deep)."""


def encode(obj: Any) -> bytes:
    """Serialise plain data (tensors, numbers, strings, lists, tuples, dicts)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def decode(frame: bytes) -> Any:
    """Load a frame without running code or building foreign classes; reject anything not plain."""
    if len(frame) > MAX_FRAME_BYTES:
        raise WireError(f"reply of {len(frame)} bytes exceeds the {MAX_FRAME_BYTES} byte limit")
    try:
        obj = torch.load(io.BytesIO(frame), weights_only=True, map_location=_map_location)
    except Exception as e:  # the weights-only unpickler refuses classes, subclasses and globals
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WireError(f"reply is not plain data ({first_line[:200]})") from None
    check_plain(obj)
    return obj


def decode_request(frame: bytes) -> Any:
    """Load a frame that the trusted side made (a request, in the sandbox): the full loader, which is
    twice as fast as the weights-only one. Never for anything that comes from the sandbox."""
    return torch.load(io.BytesIO(frame), weights_only=False, map_location=_map_location)


def _map_location(storage: Any, location: str) -> Any:
    # A CUDA tensor stays on CUDA where CUDA exists; elsewhere the load fails cleanly.
    return storage


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
    if kind is torch.Tensor:
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
        raise WireError(f"reply contains a tensor with layout {t.layout}; send a dense (strided) tensor")
    if t.is_quantized or t.device.type not in ("cpu", "cuda"):
        raise WireError(f"reply contains a {'quantized ' if t.is_quantized else ''}tensor on {t.device.type}, "
                        "which the grader does not compare")
    if t.numel() > MAX_ELEMENTS:
        raise WireError(f"reply contains a tensor of {t.numel()} elements (the limit is {MAX_ELEMENTS})")
