"""Probes for devices.py: the device chosen, and the layout of a nested structure after a move.

Only lists, tuples, dicts with string keys and tensors cross the boundary, so a check describes
the structure to move as a *spec* (an option, see ``build``: other containers are tagged dicts)
and the probe builds the real object here, from the public named tuples and factories below.
What comes back is a description: for each place in the result (``out``, ``out[1]``, ``out['x']``),
its type, or for a tensor its dtype, shape and device; and the values of tensors not on the meta device.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict, defaultdict, namedtuple
from typing import Any, Iterator

import torch
from torch import nn

from torchgrade.probes import ProbeError, Target, clip, probe

Batch = namedtuple("Batch", ["x", "y"])
Sample = namedtuple("Sample", ["features", "label", "extra"])
NAMED_TUPLES = {"Batch": Batch, "Sample": Sample}
FACTORIES = {"list": list, "int": int, "None": None}


class Opaque:
    """Not a container: to_device must hand it back untouched, tensor attribute included."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


def build(spec: Any, made: list) -> Any:
    """The object a spec stands for. Plain lists, tuples, dicts and leaves stand for themselves; a dict
    with "__kind__" is one of: namedtuple (name, items), set / frozenset (items), defaultdict
    (factory, entries), OrderedDict (entries: [key, value] pairs), max (of: a tensor; gives
    torch.max(of, dim=0), a torch.return_types.max), Linear (an nn.Linear(2, 2)), Opaque (tensor).
    Objects that must come back untouched are appended to `made`."""
    if type(spec) is list:
        return [build(s, made) for s in spec]
    if type(spec) is tuple:
        return tuple(build(s, made) for s in spec)
    if type(spec) is not dict:
        return spec
    kind = spec.get("__kind__")
    if kind is None:
        return {k: build(v, made) for k, v in spec.items()}
    items = [build(s, made) for s in spec.get("items", ())]
    if kind == "namedtuple":
        return NAMED_TUPLES[spec["name"]](*items)
    if kind in ("set", "frozenset"):
        return {"set": set, "frozenset": frozenset}[kind](items)
    if kind == "defaultdict":
        return defaultdict(FACTORIES[spec["factory"]], {k: build(v, made) for k, v in spec["entries"].items()})
    if kind == "OrderedDict":
        return OrderedDict((k, build(v, made)) for k, v in spec["entries"])
    if kind == "max":
        return torch.max(spec["of"], dim=0)
    if kind == "Linear":
        with torch.random.fork_rng(devices=[]):  # its values do not matter: leave the global generator alone
            made.append(nn.Linear(2, 2))
    elif kind == "Opaque":
        made.append(Opaque(build(spec["tensor"], made)))
    else:
        raise ValueError(f"unknown spec kind {kind!r}")
    return made[-1]


def type_name(obj: Any) -> str:
    kind = type(obj)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    # The probes' own named tuples are shown as the check's note names them (Batch), not by the module they live in.
    internal = kind.__module__ == "builtins" or kind.__module__.split(".")[0] == "course_probes"
    name = kind.__qualname__ if internal else f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(obj, tuple) and hasattr(kind, "_fields"):
        return f"{name} (a named tuple)"
    if isinstance(obj, defaultdict):
        factory = obj.default_factory
        return f"{name} (default_factory={getattr(factory, '__name__', repr(factory))})"
    if isinstance(obj, OrderedDict):
        return f"{name} (keys in the order {list(obj)!r})"
    return name


def tensor_summary(t: torch.Tensor) -> str:
    return f"{str(t.dtype).replace('torch.', '')} tensor of shape {tuple(t.shape)} on {t.device.type}"


def layout(obj: Any, path: str, made: list, structure: dict, values: dict, depth: int = 0) -> None:
    """Describe `obj` at `path` into `structure` (path -> words) and `values` (path -> CPU tensor)."""
    if depth > 20:
        raise ProbeError(f"the result nests too deeply at {path}")
    if isinstance(obj, torch.Tensor):
        structure[path] = tensor_summary(obj)
        if obj.device.type != "meta":
            values[path] = obj.detach().cpu().clone()
        return
    if isinstance(obj, (Opaque, nn.Module)):
        same = "the object passed in" if any(obj is m for m in made) else "a new object"
        tensors = [obj.tensor] if isinstance(obj, Opaque) else list(obj.parameters())
        structure[path] = f"{type_name(obj)}: {same}, its tensors on {sorted({t.device.type for t in tensors})}"
        return
    container = isinstance(obj, (list, tuple, dict, set, frozenset))
    structure[path] = type_name(obj) if container else f"{type_name(obj)} {clip(repr(obj), 60)}"
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            layout(item, f"{path}[{i}]", made, structure, values, depth + 1)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            layout(value, f"{path}[{key!r}]", made, structure, values, depth + 1)
    elif isinstance(obj, (set, frozenset)):
        # A set has no order: describe its items sorted by their description.
        parts = []
        for item in obj:
            s, v = {}, {}
            layout(item, "", made, s, v, depth + 1)
            key = repr(sorted(s.items())) + repr([(k, t.tolist()) for k, t in sorted(v.items())])
            parts.append((key, s, v))
        for i, (_, s, v) in enumerate(sorted(parts, key=lambda p: p[0])):
            structure.update({f"{path}{{item {i}}}{k}": w for k, w in s.items()})
            values.update({f"{path}{{item {i}}}{k}": w for k, w in v.items()})


@probe
def moved(target: Target, args: tuple, kwargs: dict, obj: Any = None) -> dict:
    """Build the structure the spec `obj` stands for, call to_device(structure, *args), describe the result."""
    made: list = []
    result = target(build(obj, made), *args, **kwargs)
    structure: dict[str, str] = {}
    values: dict[str, torch.Tensor] = {}
    layout(result, "out", made, structure, values)
    return {"structure": structure, "values": values}


def _true() -> bool:
    return True


def _false() -> bool:
    return False


def _one() -> int:
    return 1


def _zero() -> int:
    return 0


@contextlib.contextmanager
def cuda_answers(available: bool | None) -> Iterator[None]:
    """torch.cuda says CUDA is (or is not) available, as on a machine with (without) one GPU; None: as it is.

    pick_device's contract is what it does with torch.cuda.is_available()'s answer, so a check can ask
    both answers on any machine (constructing torch.device("cuda") needs no GPU). device_count and
    current_device agree with the answer, for code that asks those instead. The functions' code is
    swapped rather than torch.cuda's names, so that code which imported them by name (``from torch.cuda
    import is_available``) gets the same answer."""
    if available is None:
        yield
        return
    answers = {torch.cuda.is_available: _true if available else _false,
               torch.cuda.device_count: _one if available else _zero,
               torch.cuda.current_device: _zero}
    saved = {function: function.__code__ for function in answers}
    try:
        for function, answer in answers.items():
            function.__code__ = answer.__code__
        yield
    finally:
        for function, code in saved.items():
            function.__code__ = code


@probe
def chosen_device(target: Target, args: tuple, kwargs: dict, cuda_available: bool | None = None) -> dict:
    """Call pick_device (with torch.cuda answering `cuda_available`, see cuda_answers); report the class of
    the result and, for a torch.device, its type ('cpu', 'cuda')."""
    with cuda_answers(cuda_available):
        result = target(*args, **kwargs)
    if not isinstance(result, torch.device):
        return {"class": type_name(result), "device type": None}
    return {"class": "torch.device", "device type": result.type}
