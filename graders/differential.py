"""The differential check: one probe run on the reference (here) and on the student's code (sandbox).

A check calls the ``check`` fixture with the target's arguments. The reference side runs in this,
the trusted, process and is cached by the exact bytes of the request, so in a batch it is computed
once and reused for every student. The student's side runs in the sandbox; its reply is compared
here, and nothing the student sent can change how.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from . import compare as comparison
from .config import Assignment, Target
from .forbidden import ForbiddenCall, forbidden_message, runtime_violations, static_violations
from .sandbox import wire
from .sandbox.host import Sandbox, SandboxFailure
from .sandbox.probes import Target as ProbeTarget
from .sandbox.probes import run_probe


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


def reference_outcome(path: Path, target: str, request: dict) -> dict:
    """The reference's outcome for a request, computed once per process and then reused."""
    frame = wire.encode(request)
    key = hashlib.sha256(str(path).encode() + b"\0" + target.encode() + b"\0" + frame).digest()
    outcome = _reference_outcomes.get(key)
    if outcome is None:
        fresh = wire.decode(frame)  # its own copy of the inputs, strides and shared storage kept
        obj = getattr(load_reference(path), target)
        outcome = run_probe(fresh["probe"], ProbeTarget(obj, target), tuple(fresh["args"]), fresh["kwargs"],
                            fresh["options"])
        if "probe_error" in outcome:
            raise GraderError(f"the reference failed its own probe: {outcome['probe_error']}")
        outcome = wire.decode(wire.encode(outcome))  # plain and detached, exactly as the student's arrives
        _reference_outcomes[key] = outcome
    return outcome


def _raised_anywhere(value: Any, name: str) -> bool:
    """Whether an outcome holds an exception of this type anywhere (NotImplementedError is a
    RuntimeError, so a stub must not pass a check that expects a RuntimeError)."""
    if isinstance(value, dict):
        return value.get("__raised__") == name or any(_raised_anywhere(v, name) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_raised_anywhere(v, name) for v in value)
    return False


def _short(value: Any, show_values: bool) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        text = f"{dtype} tensor of shape {tuple(value.shape)}"
        if value.dim() > 1 and not value.is_contiguous():
            text += f" (non-contiguous, strides {value.stride()})"
        if value.device.type != "cpu":
            text += f" on {value.device.type}"
        if show_values and value.numel() <= 16:
            text += f" = {value.detach().cpu().tolist()}"
        return text
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        inner = ", ".join(_short(v, show_values) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Differential:
    """Runs probes for one target on both sides and fails the check with a precise message."""

    def __init__(self, assignment: Assignment, target: Target, submission: Path, sandbox: Sandbox,
                 patterns: tuple[str, ...], hidden: bool):
        self.assignment = assignment
        self.target = target
        self.submission = submission
        self.sandbox = sandbox
        self.patterns = patterns
        self.hidden = hidden
        self.seed: int | None = None

    def random(self, seed: int) -> torch.Generator:
        """A generator for this check's inputs; its seed is named in failure messages."""
        self.seed = seed
        return torch.Generator().manual_seed(seed)

    def describe_call(self, args: tuple, kwargs: dict) -> str:
        parts = [_short(a, not self.hidden) for a in args] + [f"{k}={_short(v, not self.hidden)}" for k, v in kwargs.items()]
        text = f"{self.target.name}({', '.join(parts)})"
        if self.seed is not None:
            text += f" [inputs from seed {self.seed}]"
        return text

    def __call__(self, *args: Any, probe: str = "call", kwargs: dict | None = None, options: dict | None = None,
                 exact: bool = False, rtol: float | None = None, atol: float | None = None,
                 accept: tuple[str, ...] = ()) -> tuple[Any, Any]:
        """Run `probe` on the reference and on the student's target with these arguments, and compare.

        `exact` compares floats exactly; `rtol`/`atol` override the per-dtype tolerances; `accept` lists
        exception types that also count when the reference raises. Returns (expected, actual).
        """
        __tracebackhide__ = True
        kwargs, options = kwargs or {}, options or {}
        request = {"probe": probe, "args": list(args), "kwargs": kwargs, "options": options}
        call = self.describe_call(args, kwargs)
        expected = reference_outcome(self.assignment.reference_dir / f"{self.target.exercise}.py",
                                     self.target.name, request)["value"]
        reply = self._student_reply(request, call)
        value = reply["value"]
        if _raised_anywhere(value, "NotImplementedError"):
            raise CheckFailed(f"{self.target.name} is not implemented yet (it raises NotImplementedError)")
        try:
            comparison.compare(expected, value, exact=exact, rtol=rtol, atol=atol, accept=accept)
        except comparison.Mismatch as e:
            detail = str(e)
            if isinstance(value, dict) and value.get("traceback"):
                detail += "\n" + value["traceback"].rstrip()
            raise CheckFailed(f"{call}\n{detail}") from None
        return expected, value

    def _student_reply(self, request: dict, call: str) -> dict:
        __tracebackhide__ = True
        exercise, name = self.target.exercise, self.target.name
        path = self.submission / f"{exercise}.py"
        if not path.is_file():
            raise SubmissionError(f"{exercise}.py is missing from the submission, so {name} cannot be graded")
        violations = static_violations(path, name, self.patterns)
        if violations:
            raise ForbiddenCallFailure(forbidden_message(violations, name))
        try:
            reply = self.sandbox.run(exercise, name, request["probe"], tuple(request["args"]), request["kwargs"],
                                     request["options"], timeout=self.target.time_limit)
        except SandboxFailure as e:
            raise SubmissionError(f"{call}\n{e}") from None
        if "import_error" in reply:
            failure = reply["import_error"]
            raise SubmissionError(f"{exercise}.py could not be imported ({failure.get('type')}), so none of its "
                                  f"exercises can be graded:\n{failure.get('traceback', '')}")
        if "missing" in reply:
            raise CheckFailed(f"{exercise}.py defines no `{name}`")
        calls = reply.get("calls") if isinstance(reply.get("calls"), dict) else {}
        forbidden: list[ForbiddenCall] = runtime_violations(calls, self.patterns)
        if forbidden:
            raise ForbiddenCallFailure(forbidden_message(forbidden, name))
        if "probe_error" in reply:
            raise CheckFailed(f"{call}\n{reply['probe_error']}")
        if "value" not in reply:
            raise SubmissionError(f"{call}\nthe sandbox sent an incomplete reply")
        return reply
