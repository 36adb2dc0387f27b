"""The differential check: one probe run on the reference (here) and on the student's code (sandbox).

A check calls the ``check`` fixture with the target's arguments. The reference side runs in this,
the trusted, process and is cached by a digest of the request's content (``request_key``), so in a
batch it is computed once and reused for every student. The student's side runs in the sandbox;
its reply is compared here, and nothing the student sent can change how.

Where there is no reference (a student bundle, see torchgrade/authoring/bundle.py), the reference's outcomes
come from a recording: ``<exercise>.pt`` in place of the missing ``<exercise>.py``, made by running
the visible checks once on the reference under ``recording()``. The digest is the same on every
machine and needs no torch file format in common with the recording. CUDA outcomes recorded on a
machine without CUDA fall back to the CPU recording of the same request, with its tensors moved to
the request's device; a check that finds neither is skipped, its points set aside.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import difflib
import functools
import re
import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest
import torch

from torchgrade.engine import bounds, grader_errors
from torchgrade.sandbox import sources
from torchgrade.engine import compare as comparison
from torchgrade.engine.bounds import preview
from torchgrade.engine.config import Assignment, Target
from torchgrade.sandbox.forbidden import ForbiddenCall, forbidden_message, runtime_violations, static_violations
from torchgrade.engine.hints import failure_kind, hint
from torchgrade.engine.notebooks import not_graded
from torchgrade.engine.scoring import missing_module
from torchgrade.engine.i18n import t
from torchgrade.sandbox import standin, wire
from torchgrade.sandbox.host import Died, Sandbox, SandboxFailure, Timeout
from torchgrade.sandbox.probes import Target as ProbeTarget
from torchgrade.sandbox.probes import run_probe
from torchgrade.sandbox.recorder import joined


class CheckFailed(AssertionError):
    """The student's code ran and is wrong; the message says how."""


class ForbiddenCallFailure(CheckFailed):
    """The student's code used a call its exercise forbids."""


class SubmissionError(Exception):
    """The student's code could not be graded here: a timeout, a crash, a failed import, a missing file."""


class GraderError(Exception):
    """The check or the reference is wrong (not the student's fault)."""


_reference_modules: dict[Path, ModuleType] = {}
_reference_outcomes: dict[bytes, dict] = {}
_recorded: dict[Path, dict[str, dict]] = {}
#: While recording: exercise -> request key -> outcome (see `recording`).
_recording: dict[str, dict[str, dict]] | None = None
_reference_only = False
RECORDING_FORMAT = 1
#: While an audit grades the reference: each CPU request a check sends, as (exercise.target, wire frame), for
#: the audit's own search around the checks' inputs (torchgrade/authoring/verification.py).
captured: list[tuple[str, bytes]] | None = None
#: While an audit grades the reference: exercise.target -> {"lines": the reference's lines its checks ran in the
#: sandbox, "repeated": those run twice in one call, "elsewhere": whether some ran in other processes, unseen},
#: for what no check exercises (torchgrade/authoring/coverage.py).
covered: dict[str, dict] | None = None


def load_reference(path: Path) -> ModuleType:
    """Import a reference module by path, once per process."""
    module = _reference_modules.get(path)
    if module is None:
        name = f"torchgrade_reference_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _reference_modules[path] = module
    return module


def _storage_bytes(storage: torch.UntypedStorage) -> bytes:
    storage = storage if storage.device.type == "cpu" else storage.cpu()
    return ctypes.string_at(storage.data_ptr(), storage.nbytes()) if storage.nbytes() else b""


def _digest(value: Any, h: "hashlib._Hash", storages: dict, as_cpu: bool) -> None:
    kind = type(value)
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        device = "cpu" if as_cpu else value.device.type
        key = (value.device.type, storage.data_ptr(), storage.nbytes())
        new = key not in storages
        storage_id = storages.setdefault(key, len(storages))  # shared storage is part of the request
        h.update(f"T({value.dtype},{tuple(value.shape)},{value.stride()},{value.storage_offset()},{device},"
                 f"{value.requires_grad},{storage_id},{storage.nbytes()})".encode())
        if new:
            h.update(_storage_bytes(storage))
    elif kind in (list, tuple, torch.Size):
        h.update(f"{kind.__name__}[{len(value)}](".encode())
        for item in value:
            _digest(item, h, storages, as_cpu)
        h.update(b")")
    elif kind is dict:
        h.update(f"dict[{len(value)}](".encode())
        for k, v in value.items():
            h.update(f"{k!r}:".encode())
            _digest(v, h, storages, as_cpu)
        h.update(b")")
    else:  # numbers, strings, None, dtypes, devices: their repr is exact
        h.update(f"{kind.__name__}:{value!r};".encode())


def request_key(exercise: str, target: str, request: dict, *, as_cpu: bool = False) -> str:
    """A digest of what a request asks, independent of where the files are and of torch's file format.

    It covers every value, dtype, shape, stride, storage offset, device type and which tensors share
    storage. With `as_cpu`, tensors count as CPU tensors (to find a CPU recording of a CUDA request).
    """
    h = hashlib.sha256(f"{exercise}\0{target}\0".encode())
    _digest(request, h, {}, as_cpu)
    return h.hexdigest()


def _without_tracebacks(value: Any) -> Any:
    """An outcome without the reference's tracebacks: they quote reference source lines."""
    if isinstance(value, dict):
        return {k: _without_tracebacks(v) for k, v in value.items() if not ("__raised__" in value and k == "traceback")}
    if type(value) in (list, tuple):
        return type(value)(_without_tracebacks(v) for v in value)
    return value


@contextlib.contextmanager
def recording(reference_only: bool = False) -> Iterator[dict[str, dict[str, dict]]]:
    """Record every reference outcome computed (or reused) inside the block: {exercise: {key: outcome}}.

    With `reference_only`, checks skip the student's side and see the reference's outcome as the
    student's (it records the outcomes without running a sandbox; the checks all pass).
    """
    global _recording, _reference_only
    previous, _recording = _recording, {}
    previous_only, _reference_only = _reference_only, reference_only
    try:
        yield _recording
    finally:
        _recording, _reference_only = previous, previous_only


def save_recording(outcomes: dict[str, dict], path: Path, devices: list[str]) -> None:
    """Write one exercise's recorded outcomes where `reference_outcome` looks for them (weights-only loadable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": RECORDING_FORMAT, "devices": list(devices), "outcomes": outcomes}, path)


def _devices_in(value: Any) -> set[torch.device]:
    if isinstance(value, torch.Tensor):
        return {value.device}
    if isinstance(value, dict):
        return set().union(*(_devices_in(v) for v in value.values())) if value else set()
    if type(value) in (list, tuple):
        return set().union(*(_devices_in(v) for v in value)) if value else set()
    return set()


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        if device.type == "cuda" and not torch.cuda.is_available():  # a CUDA check on the stand-in
            return standin.to_standin(value)
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_to_device(v, device) for v in value)
    return value


def recorded_outcome(path: Path, target: str, request: dict, key: str | None = None) -> dict:
    """The outcome for a request from a recording (`path`: ``<exercise>.pt``), or a skip or GraderError."""
    table = _recorded.get(path)
    if table is None:
        data = torch.load(path, weights_only=True, map_location="cpu")
        if not isinstance(data, dict) or data.get("format") != RECORDING_FORMAT:
            raise GraderError(f"{path.name}: not a recording this version of torchgrade can read")
        table = _recorded[path] = data["outcomes"]
    exercise = path.stem
    outcome = table.get(key or request_key(exercise, target, request))
    if outcome is not None:
        return _on_cuda_restored(outcome)
    devices = {d for d in _devices_in(request) if d.type != "cpu"}
    if devices:
        # Recorded without this device: the CPU outcome of the same inputs, moved to their device.
        outcome = table.get(request_key(exercise, target, request, as_cpu=True))
        if outcome is not None:
            return _to_device(outcome, next(iter(devices)))
        pytest.skip(f"no expected outcome was recorded for {exercise}.{target} on "
                    f"{'/'.join(sorted(d.type for d in devices))} in this bundle; its points are set aside")
    raise GraderError(f"no expected outcome was recorded for {exercise}.{target} with these inputs: the visible "
                      f"checks were changed after the bundle was built (get a fresh copy of them)")


def adopt_reference_outcomes(reference_dir: Path, recorded: dict[str, dict[str, dict]]) -> None:
    """Take outcomes another process recorded (`recording`) from the same reference and checks as
    computed here, so that this process does not compute them again."""
    for exercise, outcomes in recorded.items():
        path = reference_dir / f"{exercise}.py"
        for key, outcome in outcomes.items():
            _reference_outcomes.setdefault(hashlib.sha256(f"{path}\0{key}".encode()).digest(),
                                           _on_cuda_restored(outcome))  # (stand-in outcomes are marked there)


def reference_outcome(path: Path, target: str, request: dict, on_standin: bool = False) -> dict:
    """The reference's outcome for a request, computed once per process and then reused.

    `path` is ``<reference dir>/<exercise>.py``; where it is absent, ``<exercise>.pt`` beside it is a
    recording of the outcomes (a student bundle) and the outcome is looked up there. `on_standin`: the
    request's CUDA tensors are on the CUDA stand-in (a recording marks which of the outcome's tensors were
    on CUDA, and they are put there again when it is read).
    """
    exercise = path.stem
    key = request_key(exercise, target, request)
    cache_key = hashlib.sha256(f"{path}\0{key}".encode()).digest()
    outcome = _reference_outcomes.get(cache_key)
    if outcome is None:
        if not path.is_file() and path.with_suffix(".pt").is_file():
            return recorded_outcome(path.with_suffix(".pt"), target, request, key)
        fresh = wire.decode(wire.encode(request))  # its own copy of the inputs, strides and shared storage kept
        obj = getattr(load_reference(path), target)
        outcome = run_probe(fresh["probe"], ProbeTarget(obj, target), tuple(fresh["args"]), fresh["kwargs"],
                            fresh["options"], on_standin=on_standin)
        if "probe_error" in outcome:
            raise GraderError(f"the reference failed its own probe: {outcome['probe_error']}")
        outcome = wire.decode(wire.encode(outcome))  # plain and detached, exactly as the student's arrives
        _reference_outcomes[cache_key] = outcome
    if _recording is not None:
        recorded = _without_tracebacks(outcome)
        _recording.setdefault(exercise, {})[key] = _on_cuda_marked(recorded) if on_standin else recorded
    return outcome


_FRAME = re.compile(r'^  File "[^"]*", line \d+, in (\S+)$', re.MULTILINE)


def _unfinished_part(value: Any, target: str) -> str | None:
    """The function of the target that raised NotImplementedError, where it is not the target itself
    (a Function's backward, a module's forward), from the student's traceback."""
    raised = _first_raised_of(value, "NotImplementedError")
    frames = _FRAME.findall((raised or {}).get("traceback") or "")
    part = frames[-1] if frames else None
    return part if part and part not in (target, "<module>") else None


def _first_raised_of(value: Any, name: str) -> dict | None:
    if isinstance(value, dict):
        if value.get("__raised__") == name:
            return value
        values = list(value.values())
    elif isinstance(value, (list, tuple)):
        values = list(value)
    else:
        return None
    return next((found for v in values if (found := _first_raised_of(v, name)) is not None), None)


@functools.lru_cache(maxsize=256)
def _defines_function(path: Path, mtime: float, name: str) -> bool:
    try:
        tree = sources.parse(sources.read(path))
    except (OSError, sources.TooLarge):
        tree = None
    if tree is None:
        return False  # (a submission's file, in a bundle: whatever it holds, the call is shown without .apply)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return any((b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")) == "Function"
                       for b in node.bases)
    return False


def _is_autograd_function(reference: Path, submission: Path, name: str) -> bool:
    """Whether `name` is a ``torch.autograd.Function`` (read from the reference, else the submission, not run)."""
    for path in (reference, submission):
        try:
            return _defines_function(path, path.stat().st_mtime, name)
        except OSError:
            continue
    return False


_ON_CUDA = "__on_cuda__"


def _on_cuda_marked(value: Any) -> Any:
    """A stand-in outcome as a recording holds it: each tensor on the stand-in as {"__on_cuda__": its CPU values}."""
    if type(value) is standin.StandIn:
        return {_ON_CUDA: standin.plain(value)}
    if isinstance(value, dict):
        return {k: _on_cuda_marked(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_on_cuda_marked(v) for v in value)
    return value


def _on_cuda_restored(value: Any) -> Any:
    """A recorded outcome with its marked tensors on CUDA again (on the stand-in where there is no CUDA)."""
    if isinstance(value, dict):
        if set(value) == {_ON_CUDA} and isinstance(value[_ON_CUDA], torch.Tensor):
            tensor = value[_ON_CUDA]
            return tensor.to("cuda") if torch.cuda.is_available() else standin.to_standin(tensor)
        return {k: _on_cuda_restored(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_on_cuda_restored(v) for v in value)
    return value


def _raised_anywhere(value: Any, name: str) -> bool:
    """Whether an outcome holds an exception of this type anywhere (NotImplementedError is a
    RuntimeError, so a stub must not pass a check that expects a RuntimeError)."""
    if isinstance(value, dict):
        return value.get("__raised__") == name or any(_raised_anywhere(v, name) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_raised_anywhere(v, name) for v in value)
    return False


def _first_raised(value: Any) -> dict | None:
    """The first exception description inside an outcome (to show where the student's code raised it)."""
    if isinstance(value, dict):
        if "__raised__" in value:
            return value
        values = value.values()
    elif isinstance(value, (list, tuple)):
        values = value
    else:
        return None
    for v in values:
        found = _first_raised(v)
        if found is not None:
            return found
    return None


def _values(value: Any) -> str:
    """Nested lists of numbers as a student would type them, floats to 4 significant digits."""
    if isinstance(value, list):
        return "[" + ", ".join(_values(v) for v in value) + "]"
    if isinstance(value, float):
        text = f"{value:.4g}"
        return text if any(c in text for c in ".enai") else text + "."
    return repr(value)


def _short(value: Any, show_values: bool) -> str:
    if isinstance(value, torch.Tensor):
        text = t("tensor", dtype=str(value.dtype).replace("torch.", ""), shape=tuple(value.shape))
        if value.dim() > 1 and not value.is_contiguous():
            text += t("non_contiguous", stride=value.stride())
        if value.device.type != "cpu":
            text += t("on_device", device=value.device.type)
        if show_values and value.numel() <= 16:
            text += f" = {_values(value.detach().cpu().tolist())}"
        return text
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        inner = ", ".join(_short(v, show_values) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return preview(value, 60)


#: What a device mistake raises on a GPU (and on the stand-in, in the same words).
_DEVICE_ERRORS = (standin.MIXED, standin.INDEX_MIXED, standin.NUMPY)


def _standin_note(mismatch: comparison.Mismatch, raised: dict | None, reply: dict) -> str:
    """For a failure on the CUDA stand-in: where the CPU tensor was made, what to do, and where this was found."""
    lines = []
    said = str(mismatch) + (str(raised.get("message", "")) if raised is not None else "")
    device = mismatch.kind == "device" or any(text in said for text in _DEVICE_ERRORS[:3])
    if device:
        origins = reply.get("standin_origins") if isinstance(reply.get("standin_origins"), list) else []
        lines += [t("standin_made_at", where=str(o)) for o in origins[:3]]
        if mismatch.kind != "device":  # (a result on the wrong device has the hint for that already; not
            lines.append(t("standin_device_hint"))  # a "hint:" line, which a course's check may replace)
    lines.append(f"({t('standin_found')})")
    return "\n" + "\n".join(lines)


#: A check's name that says it is about an exception.
_EXCEPTION_WORDS = re.compile(r"(^|_)(raises?|raising|refuses?|rejects?|errors?|exceptions?|fails?)(_|$)")


def measures_nothing(raised: dict, request: dict, on_standin: bool) -> str:
    """The course mistake of a check whose reference raises what the check does not expect: whatever the
    student's code does, the check compares two exceptions (or passes them alike), so it measures nothing."""
    devices = sorted({d.type for d in _devices_in(request)} - {"cpu"}) or ["cpu"]  # (the check's device)
    where = "/".join(devices) + (" (the CUDA stand-in)" if on_standin else "")
    message = comparison.clip(" ".join(str(raised.get("message") or "").split()), 300)
    return (f"the reference raises {raised.get('__raised__')} on {where} ({message}), and this check does not "
            f"expect an exception (no accept= or like=, and its name does not say it raises): it measures "
            f"nothing. Change its inputs, or say which exception it is about")


class _Described:
    """The call line of a check's messages, written when a message first needs it: describing the inputs
    costs more than most passing checks take in all."""

    __slots__ = ("make", "text")

    def __init__(self, make: Callable[[], str]):
        self.make, self.text = make, None

    def __str__(self) -> str:
        if self.text is None:
            self.text = self.make()
        return self.text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class Differential:
    """Runs probes for one target on both sides and fails the check with a precise message."""

    def __init__(self, assignment: Assignment, target: Target, submission: Path, sandbox: Sandbox,
                 patterns: tuple[str, ...], hidden: bool, check: str | None = None, standin: bool = False,
                 verdicts: list | None = None):
        self.assignment = assignment
        #: Where a reply's forbidden-call verdict is left for later (`deferred`: torchgrade.plugin.settle).
        self.verdicts = verdicts if verdicts is not None else []
        self.target = target
        self.submission = submission
        self.sandbox = sandbox
        self.patterns = patterns
        self.hidden = hidden
        #: The check's function name: the course's hints may be written for one check.
        self.check = check
        #: A CUDA check on a machine without CUDA: both sides run on the CUDA stand-in (sandbox/standin.py).
        self.standin = standin
        self.seed: int | None = None

    def random(self, seed: int) -> torch.Generator:
        """A generator for this check's inputs; its seed is named in failure messages."""
        self.seed = seed
        return torch.Generator().manual_seed(seed)

    def describe_call(self, args: tuple, kwargs: dict, options: dict | None = None) -> str:
        """The call as a student would write it, with its inputs described (values only in visible checks);
        an autograd Function is called through its ``apply``; a module built and then run on a probe's
        `inputs` (`module_forward`, `module_sgd`) shows them as its forward call: ``MultiHeadAttention(8, 2)(x, mask)``."""
        parts = [_short(a, not self.hidden) for a in args] + [f"{k}={_short(v, not self.hidden)}" for k, v in kwargs.items()]
        name = self.target.name
        if _is_autograd_function(self.assignment.reference_dir / f"{self.target.exercise}.py",
                                 self.submission / f"{self.target.exercise}.py", name):
            name += ".apply"
        text = f"{name}({', '.join(parts)})"
        inputs = (options or {}).get("inputs")
        if isinstance(inputs, (tuple, list)) and inputs:
            text += f"({', '.join(_short(x, not self.hidden) for x in inputs)})"
        if self.seed is not None:
            text += " " + t("seed", seed=self.seed)
        return text

    def failure(self, kind: str, text: str, error: type[Exception] | None = None, fact: str | None = None) -> Exception:
        """A failure of this kind, its message followed by the hint for it (the course's hints, then torchgrade/engine/hints.py) when there is one."""
        advice = hint(self.target.qualname, kind, course=self.assignment.hints, check=self.check, fact=fact)
        if advice:
            text += "\n" + t("hint", text=advice)
        return (error or CheckFailed)(text)

    def __call__(self, *args: Any, probe: str = "call", kwargs: dict | None = None, options: dict | None = None,
                 exact: bool = False, rtol: float | None = None, atol: float | None = None,
                 accept: tuple[str, ...] = (), like: str | None = None) -> tuple[Any, Any]:
        """Run `probe` on the reference and on the student's target with these arguments, and compare.

        `exact` compares floats exactly; `rtol`/`atol` override the per-dtype tolerances; `accept` lists
        exception types that also count when the reference raises; `like` names the PyTorch op that
        raises for these inputs too (only then does a message say "as <like> does"). Returns (expected, actual).
        """
        __tracebackhide__ = True
        from torchgrade.sandbox.probes import PROBES

        if probe not in PROBES:  # a name the course built at run time: the course's slip, said as such
            near = difflib.get_close_matches(str(probe), sorted(PROBES), n=1)
            raise GraderError(t("unknown_probe", probe=probe, near=t("did_you_mean", name=near[0]) if near else ""))
        kwargs, options = kwargs or {}, options or {}
        request = {"probe": probe, "args": list(args), "kwargs": kwargs, "options": options}
        if captured is not None and not self.standin and all(d.type == "cpu" for d in _devices_in(request)):
            captured.append((self.target.qualname, wire.encode(request)))
        call = _Described(lambda: t("called", call=self.describe_call(args, kwargs, options)))
        outcome = reference_outcome(self.assignment.reference_dir / f"{self.target.exercise}.py",
                                    self.target.name, request, on_standin=self.standin)
        if "standin_unsupported" in outcome:
            pytest.skip(t("standin_set_aside", reason=outcome["standin_unsupported"]))
        expected = outcome["value"]
        unexpected = _first_raised(expected)
        if unexpected is not None and not self.expects_exception(accept, like):
            raise GraderError(measures_nothing(unexpected, request, self.standin))
        if _reference_only:  # recording for a bundle: no student here (see `recording`)
            return expected, wire.decode(wire.encode(expected))
        reply = self._student_reply(request, call, expected, accept, like)
        if "standin_unsupported" in reply:  # the reference ran on the stand-in: only the trusted side sets aside
            reason = comparison.clip(str(reply["standin_unsupported"]).split("\n")[0], 300)
            raise self.failure("standin", f"{call}\n{t('standin_student_unsupported', reason=reason)}")
        value = reply["value"]
        try:
            with bounds.time_budget():  # what the student sent decides how long this takes: bounded
                self._compare(expected, reply, call, exact=exact, rtol=rtol, atol=atol, accept=accept, like=like)
        except bounds.BudgetExceeded:
            raise CheckFailed(f"{call}\n{t('budget_exceeded', seconds=f'{bounds.CHECK_SECONDS:g}')}") from None
        return expected, value

    def expects_exception(self, accept: tuple[str, ...], like: str | None) -> bool:
        """Whether this check is about an exception: it names the types it accepts or the op that raises
        too (`accept`, `like`), or its name says so ("raises ...", "refuses ...", "... error")."""
        return bool(accept) or like is not None or bool(_EXCEPTION_WORDS.search(self.check or ""))

    def _compare(self, expected: Any, reply: dict, call: _Described, **how: Any) -> None:
        __tracebackhide__ = True
        value = reply["value"]
        if _raised_anywhere(value, "NotImplementedError"):
            part = _unfinished_part(value, self.target.name)
            raise CheckFailed(t("not_implemented_part", name=self.target.name, part=part) if part
                              else t("not_implemented", name=self.target.name))
        try:
            comparison.compare(expected, value, **how)
        except comparison.Mismatch as e:
            detail = str(e)
            raised = _first_raised(value) if e.kind in ("raised", "wrong_exception") else None
            if raised and raised.get("traceback"):
                detail += "\n" + t("traceback") + "\n" + raised["traceback"][:bounds.MESSAGE_CHARS].rstrip()
            if self.standin:
                detail += _standin_note(e, raised, reply)
            parts = comparison.path_parts(e.path)
            fact = parts[0] if parts and isinstance(parts[0], str) else None
            raise self.failure(failure_kind(e), f"{call}\n{detail}", fact=fact) from None

    def _deferred_verdict(self, calls: dict, findings: dict) -> str | None:
        """The message a request's forbidden calls fail its check with, its deferred findings read (or None)."""
        forbidden = runtime_violations(joined(calls, findings), self.patterns)
        return str(self.failure("forbidden", forbidden_message(forbidden, self.target.name), ForbiddenCallFailure)) \
            if forbidden else None

    def _student_reply(self, request: dict, call: _Described, expected: Any = None, accept: tuple[str, ...] = (),
                       like: str | None = None) -> dict:
        __tracebackhide__ = True
        exercise, name = self.target.exercise, self.target.name
        path = self.submission / f"{exercise}.py"
        if not path.is_file():
            raise SubmissionError(not_graded(path) or missing_module(self.assignment, exercise))
        try:
            size = path.stat().st_size  # (without forbidden calls the scan below reads nothing)
            if size > sources.MAX_SOURCE_BYTES:
                raise sources.TooLarge(sources.too_large(path, size))
            violations = static_violations(path, name, self.patterns)
        except sources.TooLarge as e:
            raise SubmissionError(f"{call}\n{e}") from None
        if violations:
            raise self.failure("forbidden", forbidden_message(violations, name), ForbiddenCallFailure)
        try:
            reply = self.sandbox.run(exercise, name, request["probe"], tuple(request["args"]), request["kwargs"],
                                     request["options"], timeout=self.target.time_limit,
                                     watch_dispatcher=bool(self.patterns), standin=self.standin, hidden=self.hidden,
                                     **({"coverage": True} if covered is not None else {}))
        except SandboxFailure as e:
            kind = "timeout" if isinstance(e, Timeout) else "crashed" if isinstance(e, Died) else "probe"
            raise self.failure(kind, f"{call}\n{e}", SubmissionError) from None
        # A failure the sandbox calls the grader's (it could not arm the watch, start the stand-in, take the
        # inputs) is the installation's only if a run without the student's code meets it too (grader_errors)
        refuted = grader_errors.judge(reply, self.sandbox, exercise, name, request, self.target.time_limit,
                                      bool(self.patterns), self.standin)
        if refuted is not None:
            raise self.failure("probe", f"{call}\n{refuted}", SubmissionError)
        if "import_error" in reply:
            failure = reply["import_error"]
            text = t("import_error", exercise=exercise, error=failure.get("type")) + f"\n{failure.get('traceback', '')}"
            raise self.failure("import", text.rstrip(), SubmissionError)
        if "missing" in reply:
            raise self.failure("missing", t("missing_name", exercise=exercise, name=name))
        if covered is not None:
            ran = covered.setdefault(self.target.qualname, {"lines": set(), "repeated": set(), "elsewhere": False})
            ran["lines"].update(reply.get("lines") or ())
            ran["repeated"].update(reply.get("lines_repeated") or ())
            ran["elsewhere"] = ran["elsewhere"] or bool(reply.get("lines_elsewhere"))
        calls = reply.get("calls") if isinstance(reply.get("calls"), dict) else {}
        token = reply.get("deferred")
        if token is not None:  # what the profiler saw comes later; now, if a message needs all of it at once
            if runtime_violations(calls, self.patterns):
                calls = joined(calls, self.sandbox.settle().get(token, {}))
            else:
                self.verdicts.append((token, functools.partial(self._deferred_verdict, calls)))
        forbidden: list[ForbiddenCall] = runtime_violations(calls, self.patterns)
        if forbidden:
            raise self.failure("forbidden", forbidden_message(forbidden, name), ForbiddenCallFailure)
        if "probe_error" in reply:
            if reply.get("returned") and isinstance(expected, dict) and "__raised__" in expected:
                # it should have raised, and returned an object instead (a class built without complaint)
                text = t("not_raised_like" if like else "not_raised", exception=" or ".join((expected["__raised__"], *accept)),
                         kind=t("kind_other", name=reply["returned"]), like=like,
                         message=comparison.clip((expected.get("message") or "").split("\n")[0], 200))
                raise self.failure("not_raised", f"{call}\n{text}")
            raise self.failure("probe", f"{call}\n{reply['probe_error']}")
        if "standin_unsupported" in reply:
            if not self.standin:  # a reply of a CPU check that speaks of the stand-in is not the sandbox's own
                raise SubmissionError(f"{call}\n{t('incomplete_reply')}")
            return reply
        if "value" not in reply:
            raise SubmissionError(f"{call}\n{t('incomplete_reply')}")
        return reply
