"""Verifying the marks of `equivalent-mutants.yaml`: a differential search of the audit's own.

A mark says no input tells a mutant apart from the reference. The audit does not take its word: it
runs every marked mutant and the reference on the inputs the target's checks send and on variations
of them it generates (`variations`), and compares far more than a check does (`observe`, `difference`):
values (each dtype's tolerance: float summation order is free), dtype, shape, strides (of dims longer
than one), storage offset and which input the result shares storage with, ``requires_grad`` and
whether there is a ``grad_fn``, the gradients that reach the inputs (an all-zero gradient and none are
the same, as the fairness rules say), the inputs after the call, and whether, and which, exception is
raised. A mutant that differs on one input is a survivor, reported with that input.

The variations, one change at a time to one argument of one of the checks' requests: a tensor made
non-contiguous; empty over a non-empty storage (at offset 0 and at its end); a size-1 dim with an odd
stride (added in front, or one it has); 0-dim over a larger storage; overlapping (stride 0); a dim of
size zero; another dtype (float64, float16, bfloat16, int32 for integers: so the arguments' dtypes
mix); every ``requires_grad`` combination of its floating-point tensors; an int (or an int of a tuple
of ints) made -1, 0, 1, moved by one, or the float of the same value (code that drops an
``operator.index`` differs only there); a float made 0 or negative; an empty 1-D tensor of the same
dtype; a tensor (and every tensor at once) made under ``torch.inference_mode()``; the call under another
default dtype; a list where a tuple is given. They are deterministic: the same requests, in the same
order, on every run; at most `LIMIT` per target (the checks' own first, the rest picked with the
audit's seed).

A mark's own ``input:`` (a call of the target, `mark_requests`) and up to `MARK_LIMIT` of its variations
run first, for that mutant. A mark with ``excludes:`` (an outside-the-contract mark) is verified only
where every difference found is one its expression excludes (`excluded`): the search goes on past
the differences it excludes and stops at the first it does not.

It cannot run, and a mark stays "unverified", for a target whose checks send no request on the CPU (all
of them CUDA-only, or skipped), or only requests of probes listed in `UNSUPPORTED_PROBES` (none now: the
data-parallel probes start their ranks from the worker as from a grading process).

The mutants run in a worker process of their own (``python -m torchgrade.authoring.verification``), not in the
sandbox: they are the course's own reference with one mechanical change, as a course's tests run it.
Each call has a time limit; a mutant that kills the worker differs (the reference did not), and the
worker starts again for the others.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib.util
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

#: At most this many requests per target (the checks' own always among them).
LIMIT = 600
#: A call of the mutant or the reference may take this long (seconds) before it counts as not finishing.
CALL_SECONDS = 5.0
#: The worker may take this long per marked mutant (and per target, for the reference) before it is stopped.
MUTANT_SECONDS = 120.0
#: Probes the search cannot run (a mark of a target whose checks ask only for these stays unverified).
UNSUPPORTED_PROBES: tuple[str, ...] = ()
#: Probes whose target is called with the request's arguments: the search calls it directly, seeing more.
DIRECT_PROBES = ("call", "call_with_grad", "view", "inplace")


@dataclass
class Verdict:
    """What the search found for one marked mutant."""

    status: str  # verified | differs | unverified
    evidence: str = ""  # differs: the input and what differed; unverified: why; verified: how many inputs
    inputs: int = 0
    outside: int = 0  # verified: the differences found that the mark's ``excludes:`` puts outside the contract


# --- the variations ---

@dataclass(frozen=True)
class FunctionArg:
    """A function the search passes where the target takes one (a request holds this description, plain and
    copyable; `made` builds the function for one call, with a parameter of its own)."""

    kind: str

    def made(self, like: Any) -> Any:
        import torch

        dtype = like.dtype if isinstance(like, torch.Tensor) and like.is_floating_point() else torch.float32
        device = like.device if isinstance(like, torch.Tensor) else "cpu"
        w = torch.tensor(1.5, dtype=dtype, device=device, requires_grad=True)  # a parameter the function closes over
        return eval(FUNCTIONS[self.kind], {"torch": torch, "w": w})  # noqa: S307 - the constant texts below


#: The functions the search passes to a target that takes a callable: of the input only, closing over a
#: parameter ``w`` that requires grad (as a layer's weight), constant in the input (with and without that
#: parameter). Each acts elementwise (as second_derivative asks) and keeps the shape, so a check's ``v`` fits.
FUNCTIONS: dict[str, str] = {
    "of the input only": "lambda t: torch.sin(t) * t",
    "linear in the input": "lambda t: 3 * t",
    "closing over a parameter that requires grad": "lambda t: t * w",
    "of the input and a parameter that requires grad": "lambda t: torch.sin(t * w)",
    "constant in the input": "lambda t: torch.ones_like(t)",
    "constant in the input, through a parameter that requires grad": "lambda t: w * torch.ones_like(t)",
}


def callable_positions(obj: Any) -> tuple[int, ...]:
    """The positions of `obj`'s parameters annotated as callables (``f: Callable[...]``), where the search
    passes functions of its own."""
    import inspect

    try:
        parameters = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return ()
    return tuple(i for i, p in enumerate(parameters) if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                 and "Callable" in str(p.annotation))


def _made_functions(request: dict) -> dict:
    """The request with each FunctionArg made into its function (for one call: its parameter is fresh)."""
    import torch

    like = next((v for v in request["args"] if isinstance(v, torch.Tensor)), None)
    request["args"] = [a.made(like) if isinstance(a, FunctionArg) else a for a in request["args"]]
    return request


def function_variations(request: dict, positions: tuple[int, ...]) -> Iterator[tuple[str, dict]]:
    """The request with a function of the search's own at each callable position (a check names its functions
    for its probe, ``autograd_call(check, "sin", x)``): called directly, so every fact of the result shows."""
    for i in positions:
        if i < len(request["args"]) and isinstance(request["args"][i], str):
            for kind in FUNCTIONS:
                args = list(request["args"])
                args[i] = FunctionArg(kind)
                yield (f"{_label(('args', i))} a function {kind}",
                       {"probe": "call", "args": args, "kwargs": dict(request["kwargs"]), "options": {}})

def _describe(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        text = f"tensor({str(value.dtype).replace('torch.', '')}, shape={tuple(value.shape)}"
        if value.dim() and not value.is_contiguous():
            text += f", stride={value.stride()}"
        if value.storage_offset():
            text += f", offset={value.storage_offset()}"
        if value.untyped_storage().nbytes() != value.numel() * value.element_size():
            text += f", storage of {value.untyped_storage().nbytes() // max(1, value.element_size())}"
        if value.requires_grad:
            text += ", requires_grad"
        if value.numel() <= 6:
            text += f", {value.detach().tolist()}"
        return text + ")"
    if isinstance(value, FunctionArg):
        text = FUNCTIONS[value.kind]
        return text + (" (w = torch.tensor(1.5, requires_grad=True))" if "w" in text.split(":")[1] else "")
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    return repr(value)


def describe_request(name: str, request: dict) -> str:
    """The call as the author would write it: ``view(tensor(float32, shape=(0,), storage of 6), 3)``."""
    parts = [_describe(a) for a in request["args"]] + [f"{k}={_describe(v)}" for k, v in request["kwargs"].items()]
    text = f"{name}({', '.join(parts)})"
    if request.get("inference"):
        text += " [" + ", ".join(_label(tuple(p)) for p in request["inference"]) + " made under torch.inference_mode()]"
    if request.get("default_dtype"):
        text += f" [under torch.set_default_dtype(torch.{request['default_dtype']})]"
    if request["probe"] not in ("call",):
        text += f" [probe {request['probe']}" + (f", options {_describe(request['options'])}"
                                                 if request["options"] else "") + "]"
    return text


def _tensor_variants(t: Any) -> Iterator[tuple[str, Any]]:
    import torch

    if t.layout != torch.strided:
        return
    v = t.detach()
    if v.dim() >= 2:
        yield "non-contiguous", v.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif v.dim() == 1 and v.numel() > 1:
        yield "non-contiguous", torch.stack([v, v], -1)[..., 0]
    if v.dim() >= 1 and v.numel() > 0:
        yield "empty over a non-empty storage", v[:0]
        yield "empty at the end of a non-empty storage", v[v.shape[0]:]
        yield "0-dim over a larger storage", v.reshape(-1)[-1]
        yield "overlapping (stride 0)", v[:1].expand(v.shape)
    for d in range(v.dim()):
        if v.shape[d] > 0:
            yield f"dim {d} of size zero", v.narrow(d, 0, 0)
    for odd in (0, 7):  # a size-1 dim's stride is never used to address an element: any value is valid
        for d in range(v.dim() + 1):
            yield (f"a size-1 dim with stride {odd} at {d}",
                   v.as_strided((*v.shape[:d], 1, *v.shape[d:]), (*v.stride()[:d], odd, *v.stride()[d:]), v.storage_offset()))
        if 1 in v.shape:
            stride = [odd if n == 1 else s for n, s in zip(v.shape, v.stride())]
            yield f"its size-1 dims with stride {odd}", v.as_strided(v.shape, stride, v.storage_offset())
    if v.numel() and (v.is_floating_point() or v.dtype in (torch.int64, torch.int32)):
        g = torch.Generator().manual_seed(v.numel())
        if v.is_floating_point():  # other values: each half from -2 to 2 (0 and ±1 among them), and a random draw
            n = v.numel()
            others = [torch.arange(k * n, (k + 1) * n, dtype=torch.float64).remainder(9).sub(4).div(2)
                      for k in range(-(-9 // n))] + [torch.randn(n, generator=g) * 3]
        else:
            others = [torch.randint(-1, max(2, int(v.max()) + 2), (v.numel(),), generator=g)]
        for i, values in enumerate(others):
            made = v.clone()
            made.copy_(values.reshape(v.shape).to(v.dtype))
            yield f"other values ({i + 1})", made
    if v.is_floating_point():
        for dtype in (torch.float64, torch.float16, torch.bfloat16):
            if dtype != v.dtype:
                yield f"as {str(dtype).replace('torch.', '')}", v.to(dtype)
    elif v.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        yield "as int32" if v.dtype != torch.int32 else "as int64", v.to(torch.int32 if v.dtype != torch.int32
                                                                           else torch.int64)


def _int_variants(n: int) -> list[int]:
    return [m for m in dict.fromkeys((-1, 0, 1, n - 1, n + 1, -2)) if m != n]


def _replaced(request: dict, where: tuple, value: Any) -> dict:
    """The request with one argument (``("args", i)``, ``("kwargs", k)``, or one more index into it) replaced."""
    import torch

    made = dict(request, args=list(request["args"]), kwargs=dict(request["kwargs"]))
    container, key = made[where[0]], where[1]
    if len(where) == 2:
        container[key] = value
    else:
        inner = list(container[key])
        inner[where[2]] = value
        container[key] = type(container[key])(inner) if not isinstance(container[key], torch.Size) else tuple(inner)
    return made


#: The tensor variations that are combined with a number moved (two changes at once).
_ODD = ("empty", "0-dim", "a size-1 dim", "its size-1 dims", "dim ")


def _label(place: tuple) -> str:
    return f"argument {place[1]}" if place[0] == "args" else f"{place[1]}="


def _number_variants(request: dict, place: tuple) -> Iterator[tuple[str, tuple, Any]]:
    """(what was changed, where, the new value) for a number, or an int of a tuple of ints, at `place`."""
    import torch

    value = request[place[0]][place[1]]
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        for n in _int_variants(value):
            yield f"{_label(place)} = {n}", place, n
        yield f"{_label(place)} = {float(value)} (a float)", place, float(value)
    elif isinstance(value, float):
        for x in (0.0, -abs(value) or -1.0):
            if x != value:
                yield f"{_label(place)} = {x}", place, x
    elif isinstance(value, (tuple, list, torch.Size)) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        for j, v in enumerate(value):
            for n in _int_variants(v):
                yield f"{_label(place)}[{j}] = {n}", (*place, j), n
            yield f"{_label(place)}[{j}] = {float(v)} (a float)", (*place, j), float(v)


def variations(request: dict) -> Iterator[tuple[str, dict]]:
    """(what was changed, the request) for each variation of one request, the request itself first."""
    import torch

    yield "the check's input", request
    places = [("args", i) for i in range(len(request["args"]))] + [("kwargs", k) for k in request["kwargs"]]
    tensors = [p for p in places if isinstance(request[p[0]][p[1]], torch.Tensor)]
    floats = [p for p in tensors if request[p[0]][p[1]].is_floating_point()]
    numbers = [n for p in places for n in _number_variants(request, p)]
    for place in tensors:
        value = request[place[0]][place[1]]
        for what, made in _tensor_variants(value):
            if value.requires_grad and made.is_floating_point():
                made = made.detach().requires_grad_(True)
            yield f"{_label(place)} {what}", _replaced(request, place, made)
    for what, where, n in numbers:
        yield what, _replaced(request, where, n)
    # two changes at once: a tensor made odd (empty, 0-dim, a size-1 dim with an odd stride) and a number
    # or a shape entry moved (`view` of an empty slice of a longer tensor to shape 3)
    for place in tensors:
        for what, made in _tensor_variants(request[place[0]][place[1]]):
            if what.startswith(_ODD):
                changed = _replaced(request, place, made)
                for change, where, n in numbers:
                    yield f"{_label(place)} {what}, {change}", _replaced(changed, where, n)
    for flags in itertools.product((False, True), repeat=min(len(floats), 3)):
        made = request
        for place, flag in zip(floats, flags):
            made = _replaced(made, place, made[place[0]][place[1]].detach().requires_grad_(flag))
        if any(made[p[0]][p[1]].requires_grad != request[p[0]][p[1]].requires_grad for p in floats):
            yield "requires_grad " + ", ".join(f"{p[1]}={f}" for p, f in zip(floats, flags)), made
    yield from _more_variations(request, places, tensors)


def _more_variations(request: dict, places: list[tuple], tensors: list[tuple]) -> Iterator[tuple[str, dict]]:
    """The variations added for issue 48: an empty tensor of each tensor's dtype, each tensor (and all of them)
    made under ``torch.inference_mode()`` (a valid input whose detached alias refuses ``requires_grad_``), the
    call under another default dtype, a list where a tuple is given."""
    import torch

    for place in tensors:
        value = request[place[0]][place[1]]
        if value.layout == torch.strided and tuple(value.shape) != (0,):
            yield f"{_label(place)} empty, shape (0,)", _replaced(request, place, value.detach().new_empty((0,)).requires_grad_(
                value.requires_grad and value.is_floating_point()))
    plain = [p for p in tensors if not request[p[0]][p[1]].requires_grad and request[p[0]][p[1]].layout == torch.strided]
    for place in plain:
        yield f"{_label(place)} made under torch.inference_mode()", dict(request, inference=[list(place)])
    if len(plain) > 1:
        yield "every tensor made under torch.inference_mode()", dict(request, inference=[list(p) for p in plain])
    if tensors:
        default = torch.get_default_dtype()
        other = torch.float64 if default != torch.float64 else torch.float32
        yield f"under default dtype {str(other).replace('torch.', '')}", dict(request, default_dtype=str(other).replace("torch.", ""))
    for place in places:
        value = request[place[0]][place[1]]
        if type(value) in (tuple, torch.Size):
            yield f"{_label(place)} a list, not a tuple", _replaced(request, place, list(value))


def plan(requests: list[dict], seed: int, qualname: str, limit: int = LIMIT,
         callables: tuple[int, ...] = ()) -> list[tuple[str, dict]]:
    """The requests to compare on: the checks' own and, for a target that takes a callable (at the positions
    `callables`), each with the search's functions; then variations (deduplicated), at most `limit`."""
    from torchgrade.engine.differential import request_key

    own, more, seen = [], [], set()
    for request in requests:
        if request["probe"] in UNSUPPORTED_PROBES:
            continue
        for what, made in itertools.chain(variations(request), function_variations(request, callables)):
            try:  # (a function is keyed by its description)
                key = request_key("", qualname, {**made, "args": [f"<function {a.kind}>" if isinstance(a, FunctionArg)
                                                                  else a for a in made["args"]]})
            except Exception:  # noqa: BLE001 - a variation that cannot even be described is not tried
                continue
            if key in seen:
                continue
            seen.add(key)
            (own if what == "the check's input" or " a function " in what else more).append((what, made))
    rest = max(0, limit - len(own))
    if len(more) > rest:
        chosen = set(random.Random(f"{seed}\0{qualname}").sample(range(len(more)), rest))
        more = [m for i, m in enumerate(more) if i in chosen]
    return own[:limit] + more


# --- observing one call, in the worker ---

class _TookTooLong(BaseException):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise _TookTooLong()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _fresh(request: dict) -> dict:
    """Its own copy of a request's inputs (strides, offsets and shared storage kept; a tensor the request makes
    under ``torch.inference_mode()`` made there again: a copy is a normal tensor)."""
    import torch

    made = copy.deepcopy(request)
    for container, key in request.get("inference", ()):
        with torch.inference_mode():
            made[container][key] = made[container][key].clone()
    return made


def _tensor_facts(t: Any, inputs: list) -> dict:
    import torch

    v = t.detach()
    if any(n < 0 for n in v.shape) or any(st < 0 for st in v.stride()):  # made by as_strided without checks
        return {"malformed": f"a tensor of shape {tuple(v.shape)} and strides {v.stride()}"}
    storage = v.untyped_storage().data_ptr() if v.layout == torch.strided else None
    shares = [i for i, x in enumerate(inputs) if storage and x.layout == torch.strided
              and x.untyped_storage().data_ptr() == storage]
    return {"dtype": str(v.dtype), "shape": tuple(v.shape),
            "stride": tuple(s for s, n in zip(v.stride(), v.shape) if n > 1) if v.numel() else (),
            "offset_in_shared": v.storage_offset() if shares else None,
            "shares_storage_with_input": shares[:1],
            "requires_grad": t.requires_grad, "has_grad_fn": t.grad_fn is not None, "value": v.clone()}


def _facts(value: Any, inputs: list, depth: int = 0) -> Any:
    import torch

    if depth > 12:
        return "<deep>"
    if isinstance(value, torch.Tensor):
        return _tensor_facts(value, inputs)
    if isinstance(value, (list, tuple)):
        return [type(value).__name__] + [_facts(v, inputs, depth + 1) for v in value]
    if isinstance(value, dict):
        if "__raised__" in value:  # an exception a probe reports: its type (the message's words are free)
            return {"raised": value["__raised__"]}
        return {str(k): _facts(v, inputs, depth + 1) for k, v in value.items()}
    if isinstance(value, (int, float, str, bool, type(None), complex, torch.dtype, torch.device)):
        return value
    if isinstance(value, torch.nn.Module):
        return {"module": type(value).__name__,
                "parameters": {n: _tensor_facts(p, inputs) for n, p in value.named_parameters()}}
    return f"<{type(value).__name__}>"


def _inputs_of(request: dict) -> list:
    import torch

    return [v for v in [*request["args"], *request["kwargs"].values()] if isinstance(v, torch.Tensor)]


def _gradients(out: Any, inputs: list, seed: int) -> list:
    import torch

    from torchgrade.sandbox.probes.basic import grad_seed

    outs = [o for o in (out if isinstance(out, (list, tuple)) else [out])
            if isinstance(o, torch.Tensor) and o.requires_grad and (o.is_floating_point() or o.is_complex())]
    wrt = [x for x in inputs if x.requires_grad]
    if not outs or not wrt:
        return []
    grads = torch.autograd.grad(outs, wrt, [grad_seed(o, seed + i) for i, o in enumerate(outs)], allow_unused=True)
    return [None if g is None or not bool((g != 0).any()) else g.detach().clone() for g in grads]


def observe(obj: Any, name: str, request: dict, seconds: float = CALL_SECONDS) -> Any:
    """What happens when `request` runs on `obj`: plain facts, or ``{"raised": type}``/``{"timeout": True}``."""
    import torch

    request = _made_functions(_fresh(request))
    torch.random.default_generator.manual_seed(0)  # (torch.manual_seed asks every device backend: 8 ms a call)
    default = torch.get_default_dtype()
    if request.get("default_dtype"):
        torch.set_default_dtype(getattr(torch, request["default_dtype"]))
    try:
        return _observe(obj, name, request, seconds)
    finally:
        torch.set_default_dtype(default)


def _observe(obj: Any, name: str, request: dict, seconds: float) -> Any:
    import torch

    from torchgrade.sandbox.probes import Target, run_probe

    try:
        with _time_limit(seconds):
            if request["probe"] in DIRECT_PROBES:
                inputs = _inputs_of(request)
                try:
                    out = getattr(obj, request.get("method") or "__call__")(*request["args"], **request["kwargs"])
                except Exception as e:  # noqa: BLE001 - which exception is a fact
                    return {"raised": type(e).__name__, "inputs_after": [_tensor_facts(x, []) for x in inputs]}
                try:
                    result = _facts(out, inputs)
                except Exception as e:  # noqa: BLE001 - a result that cannot be read is a fact too
                    result = {"unreadable": type(e).__name__}
                facts = {"result": result, "same_object_as_input": [i for i, x in enumerate(inputs) if out is x]}
                try:
                    facts["grads"] = _gradients(out, inputs, 0)
                except Exception as e:  # noqa: BLE001
                    facts["grads"] = {"raised": type(e).__name__}
                facts["inputs_after"] = [_tensor_facts(x, []) | {"grad": None if x.grad is None else x.grad.clone()}
                                         for x in inputs]
                return facts
            try:
                outcome = run_probe(request["probe"], Target(obj, name), tuple(request["args"]), request["kwargs"],
                                    request["options"])
            except Exception as e:  # noqa: BLE001 - the probe itself cannot take this variation (its own setup)
                return {"unusable": type(e).__name__}
            if "value" in outcome and isinstance(outcome["value"], dict) and "__raised__" in outcome["value"]:
                return {"raised": outcome["value"]["__raised__"]}
            return {"probe": _facts(outcome.get("value"), []), "probe_error": "probe_error" in outcome}
    except _TookTooLong:
        return {"timeout": True}


def difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where and how two observations differ (None: they agree)."""
    import torch

    if not path and isinstance(a, dict) and isinstance(b, dict) and ("raised" in a) != ("raised" in b):
        said = {k: f"raises {v['raised']}" if "raised" in v else "times out" if v.get("timeout") else "returns"
                for k, v in (("reference", a), ("mutant", b))}
        return f"the reference {said['reference']}, the mutant {said['mutant']}"

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{path}: {type(a).__name__} against {type(b).__name__}"
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{path}: {a.dtype}{tuple(a.shape)} against {b.dtype}{tuple(b.shape)}"
        try:
            torch.testing.assert_close(b, a, equal_nan=True, check_device=False)
        except AssertionError:
            return f"{path}: values {_describe(a)} against {_describe(b)}"
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                return f"{path}.{key}: only one side has it ({'reference' if key in a else 'mutant'})"
            found = difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: {len(a)} items against {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            found = difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(a, float) and isinstance(b, float):
        same = a == b or (a != a and b != b) or abs(a - b) <= 1e-7 + 1e-6 * abs(a)
        return None if same else f"{path}: {a!r} against {b!r}"
    if type(a) is not type(b) or a != b:
        return f"{path}: {a!r} against {b!r}"
    return None


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _deterministic() -> None:
    """Uninitialised memory filled with NaN, every run the same: `empty` for `zeros` shows, every time."""
    import torch

    torch.use_deterministic_algorithms(True, warn_only=True)
    with contextlib.suppress(AttributeError):
        torch.utils.deterministic.fill_uninitialized_memory = True


def worker(job_path: str) -> None:
    """Run one job file: for each target, the reference on every planned request, then each mutant until
    one request shows a difference. One JSON line per mutant ({"start": id} before it)."""
    import warnings

    import torch

    from torchgrade.sandbox import wire
    from torchgrade.sandbox.probes import load_course

    warnings.simplefilter("ignore")
    _deterministic()
    job = json.loads(Path(job_path).read_text())
    load_course(job["probes"])
    out = sys.stdout
    for target in job["targets"]:
        name = target["name"]
        requests = wire.decode(Path(target["requests"]).read_bytes())
        reference = getattr(_load(Path(target["reference"]), f"torchgrade_verify_reference_{target['exercise']}"), name)
        planned = plan([wire.decode(f) for f in requests], job["seed"], target["qualname"],
                       callables=callable_positions(reference))
        expected = [(what, request, observe(reference, name, request)) for what, request in planned]
        for mutant in target["mutants"]:
            out.write(json.dumps({"start": mutant["key"]}) + "\n")
            out.flush()
            obj = getattr(_load(Path(mutant["path"]), f"torchgrade_verify_{mutant['key']}"), name)
            try:
                own = [(what, request, observe(reference, name, request))
                       for what, request in mark_requests(mutant.get("input"), name)]
            except Exception as e:  # noqa: BLE001 - the author's text: said, and the mark stays unverified
                verdict = {"key": mutant["key"], "status": "unverified", "inputs": 0,
                           "evidence": f"its input: cannot be evaluated ({type(e).__name__}: {e})"}
            else:
                verdict = _search(reference, obj, name, own + expected, mutant.get("excludes"))
                verdict["key"] = mutant["key"]
            out.write(json.dumps(verdict) + "\n")
            out.flush()
            torch.set_grad_enabled(True)


#: At most this many variations of a mark's own input are tried (before the checks' requests).
MARK_LIMIT = 200


def mark_requests(text: str | None, name: str) -> list[tuple[str, dict]]:
    """A mark's ``input:`` (a call of the target, ``pad2d(torch.ones(5), 1)``) as a request, and its variations:
    the search runs these first. ValueError where the text is not such a call."""
    if not text:
        return []
    import math

    import torch

    call = parse_input(text, name)
    scope = {"torch": torch, "math": math, "F": torch.nn.functional, "nn": torch.nn}
    value = lambda node: eval(compile(ast.Expression(node), "<input>", "eval"), scope)  # noqa: E731, S307 - the course's text
    request = {"probe": "call", "args": [value(a) for a in call.args],
               "kwargs": {k.arg: value(k.value) for k in call.keywords}, "options": {}}
    if isinstance(call.func, ast.Attribute):  # Function.apply(...)
        request["method"] = "apply"
    made = [("the mark's input", request)]
    for what, varied in itertools.islice(variations(request), 1, MARK_LIMIT + 1):
        made.append((f"the mark's input, {what}", varied))
    return made


def parse_input(text: str, name: str) -> ast.Call:
    """A mark's ``input:`` parsed: one call of the target (``name(...)``, or ``name.apply(...)`` for an
    autograd Function), with no ``*``/``**`` arguments. ValueError otherwise."""
    try:
        node = ast.parse(" ".join(text.split()), mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"not a Python expression ({e.msg})") from None
    func = node.func if isinstance(node, ast.Call) else None
    if func is None or ast.unparse(func) not in (name, f"{name}.apply") \
            or any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise ValueError(f"expected one call of {name}, such as {name}(torch.ones(2, 3), 1)")
    return node


def excluded(expression: str, obj: Any, request: dict, raised: tuple = (None, None), found: str = "") -> bool:
    """Whether a mark's ``excludes:`` holds for a request: the expression, over the target's parameters by
    name (defaults filled in), ``raised`` (the names of the exceptions the reference and the mutant raise
    there, None for one that returns: where the contract lets either be raised) and ``difference`` (where
    and how the two differ, as `difference` says it: ``.result.stride: ...`` where only strides do), is true. False where it
    cannot be told (the arguments do not bind, or the expression raises): only a difference the predicate
    positively excludes is outside the contract."""
    import inspect
    import math

    import torch

    try:
        target = obj.forward if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) else obj
        bound = inspect.signature(target).bind(*([None] if target is not obj else []), *request["args"],
                                               **request["kwargs"])
        bound.apply_defaults()
        names = {k: v for k, v in bound.arguments.items() if k != "ctx"} | {"raised": raised, "difference": found}
        # (one namespace: a generator expression in it sees the parameters, as it would not see eval's locals)
        return bool(eval(expression, {"torch": torch, "math": math, "__builtins__": __builtins__, **names}))  # noqa: S307
    except Exception:  # noqa: BLE001
        return False


def _search(reference: Any, obj: Any, name: str, expected: list, excludes: str | None) -> dict:
    """Compare the mutant with the reference on each planned request: "differs" at the first difference the
    mark's ``excludes:`` does not exclude (every difference, without one); "verified" otherwise, saying how many
    differences were outside the contract and the first of them."""
    outside, first_outside = 0, ""
    for what, request, facts in expected:
        if facts.get("timeout") or "unusable" in facts:
            continue  # the reference did not finish, or the probe cannot take this input: nothing to compare
        got = observe(obj, name, request)
        found = difference(facts, got)
        if not found:
            continue
        if excludes and excluded(excludes, reference, request, (facts.get("raised"), got.get("raised")), found):
            found = f"{describe_request(name, request)} ({what}): {found}"
            outside += 1
            first_outside = first_outside or found
            continue
        found = f"{describe_request(name, request)} ({what}): {found}"
        return {"status": "differs", "evidence": found, "inputs": len(expected)}
    return {"status": "verified", "evidence": first_outside, "inputs": len(expected), "outside": outside}


def verify(assignment: Any, marked: dict[str, list[tuple[str, str, dict]]], requests_dir: Path, work: Path, seed: int,
           say: Any = lambda text: None) -> dict[tuple[str, str], Verdict]:
    """{(exercise.target, mutant id): Verdict} for the marked mutants (`marked`: target -> [(id, mutant file, its
    mark: ``input:`` and ``excludes:`` are the search's)])."""
    results: dict[tuple[str, str], Verdict] = {}
    targets = []
    for qualname, mutants in marked.items():
        exercise, name = qualname.split(".", 1)
        requests = requests_dir / f"{qualname}.req"
        from torchgrade.sandbox import wire

        sent = wire.decode(requests.read_bytes()) if requests.is_file() else []
        probes = sorted({wire.decode(f)["probe"] for f in sent})
        usable = [p for p in probes if p not in UNSUPPORTED_PROBES]
        if not usable:
            why = ("no check of it sends a request on the CPU" if not probes else
                   f"its checks ask only for {', '.join(probes)}, which it cannot run")
            for ident, *_ in mutants:
                results[(qualname, ident)] = Verdict("unverified", f"cannot run the search: {why}")
            continue
        targets.append({"qualname": qualname, "exercise": exercise, "name": name, "requests": str(requests),
                        "reference": str(assignment.reference_dir / f"{exercise}.py"),
                        "mutants": [{"key": f"{qualname}@{ident}", "id": ident, "path": path, "input": entry.get("input"),
                                     "excludes": entry.get("excludes")} for ident, path, entry in mutants]})
    pending = {m["key"]: (t["qualname"], m["id"]) for t in targets for m in t["mutants"]}
    attempt = 0
    while pending and attempt < 50:
        attempt += 1
        job = {"probes": str(assignment.probes_dir), "seed": seed,
               "targets": [dict(t, mutants=[m for m in t["mutants"] if m["key"] in pending]) for t in targets]}
        job["targets"] = [t for t in job["targets"] if t["mutants"]]
        path = work / f"verify-{attempt}.json"
        path.write_text(json.dumps(job))
        say(f"verifying {len(pending)} marked mutant(s)")
        current, done = None, False
        with subprocess.Popen([sys.executable, "-m", "torchgrade.authoring.verification", str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, cwd=work,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}) as process:
            import threading

            timer = threading.Timer(MUTANT_SECONDS * (len(pending) + len(job["targets"])), process.kill)
            timer.start()
            try:
                for line in process.stdout:
                    try:
                        item = json.loads(line)
                    except ValueError:
                        continue
                    if "start" in item:
                        current = item["start"]
                    elif item.get("key") in pending:
                        qualname, ident = pending.pop(item["key"])
                        results[(qualname, ident)] = Verdict(item["status"], item["evidence"], item["inputs"],
                                                             item.get("outside", 0))
                        current = None
                done = process.wait() == 0
            finally:
                timer.cancel()
        if current in pending:  # it ended the worker (a crash, or its time): that is a difference
            qualname, ident = pending.pop(current)
            results[(qualname, ident)] = Verdict("differs", "the mutant ended the process or ran out of time on the "
                                                            "search's inputs (the reference did not)")
        elif not done and pending:
            break  # the worker failed before any mutant (the reference itself): the rest stay unverified
    for key, (qualname, ident) in pending.items():
        results[(qualname, ident)] = Verdict("unverified", "the search could not run (its worker failed)")
    return results


if __name__ == "__main__":
    worker(sys.argv[1])
