"""The grader's own failures, told apart from the student's in the trusted process.

A sandbox worker answers ``{"grader_fault": {"stage": ..., "error": ...}}`` when what failed ran before
or outside the student's code: the call watch that would not arm, the CUDA stand-in that would not start
(torchgrade/sandbox/worker.py); ``{"sandbox_error": ...}`` when it could not even take a check's inputs.
Both are only claims: the student's code runs in that process and can send either, or cause the failure
itself (a module that breaks torch's profiler at import). So the claim is tested here, without the
student's code: the same request goes to a worker of a grader-made module (`_canary`), at the same
isolation level. The installation's fault is one that worker meets too; it becomes an
`InstallationError` (`check` exits 2 with its one line, `grade` marks the row as a grader error, the
Gradescope autograder fails closed). Any other claim is the submission's, and costs it the check.

A student's exception that imitates a grader error (a ``TypeError`` naming ``_ExperimentalConfig``)
raised inside the student's code is a value of the probe's like any other: it never reaches here. A
probe's own code is tested the same way, by the reference's run of the same probe in this process first
(differential.reference_outcome: "the reference failed its own probe" is a GraderError); where the probe
fails only on what the student's code returned, the failure is the student's.
"""

from __future__ import annotations

import importlib.metadata
import keyword
import shutil
import tempfile
from pathlib import Path
from typing import Any

#: What each stage is, in the one line a user reads.
STAGES = {"watch": "call watch", "standin": "CUDA stand-in", "inputs": "sandbox"}
#: The installation faults met in this process, each as its one line (`check`, the autograder read it).
FAULTS: list[str] = []
#: The canary's verdict per (stage, level, watched, on the stand-in; for inputs also the error and the inputs'
#: devices): the claim held (a line) or not ("").
_verdicts: dict[tuple, str] = {}


class InstallationError(Exception):
    """Something in this installation of torchgrade or torch fails without the student's code."""


def claim(reply: dict) -> tuple[str, str] | None:
    """(stage, error) where a worker's reply says the grader failed, else None; a claim of the wrong shape
    is the submission's (a reply the sandbox's own code never sends)."""
    if "sandbox_error" in reply:
        return "inputs", str(reply["sandbox_error"])
    fault = reply.get("grader_fault")
    if fault is None:
        return None
    if type(fault) is not dict or fault.get("stage") not in STAGES or type(fault.get("error")) is not str:
        return "forged", ""
    return fault["stage"], fault["error"]


def line(stage: str, error: str) -> str:
    """The one line that says what in the installation is wrong, and what to do."""
    import torch

    why = " ".join(error.split())
    why = why if len(why) <= 400 else why[:400] + " [...]"
    return (f"torchgrade's {STAGES[stage]} cannot start with torch {torch.__version__}: {why}; install a torch "
            f"release torchgrade supports ({_torch_range()}) or report this")


def _torch_range() -> str:
    try:
        requirement = next(r for r in importlib.metadata.requires("torchgrade") or () if r.startswith("torch"))
    except (importlib.metadata.PackageNotFoundError, StopIteration):
        return "see torchgrade's pyproject.toml"
    return requirement.replace(" ", "")


def judge(reply: dict, sandbox: Any, exercise: str, target: str, request: dict, timeout: float, watch: bool,
          standin: bool) -> str | None:
    """None if `reply` claims no failure of the grader's. A claim the canary confirms raises
    InstallationError; one it does not is the submission's, and the text to charge it with is returned."""
    found = claim(reply)
    if found is None:
        return None
    stage, error = found
    if stage != "forged":
        key = (stage, sandbox.isolation, watch, standin)
        if stage == "inputs":  # inputs differ from check to check: the same error on inputs on the same devices
            key += (error, _devices(request))
        verdict = _verdicts.get(key)
        if verdict is None:
            verdict = _verdicts[key] = _canary(sandbox, exercise, target, request, timeout, watch, standin, stage)
        if verdict:
            if verdict not in FAULTS:
                FAULTS.append(verdict)
            raise InstallationError(verdict)
    return ("the sandbox reported a failure of the grader's own that a run without your code does not have: "
            "your code caused it (does it change torch's profiler, or torchgrade's code in its process?)")


def _devices(request: dict) -> tuple[str, ...]:
    """The devices of the tensors in a request's arguments (what a sandbox may be unable to make inputs on)."""
    import torch
    from torch.utils._pytree import tree_leaves

    leaves = tree_leaves((request["args"], request["kwargs"]))
    return tuple(sorted({leaf.device.type for leaf in leaves if isinstance(leaf, torch.Tensor)}))


def _canary(sandbox: Any, exercise: str, target: str, request: dict, timeout: float, watch: bool,
            standin: bool, stage: str) -> str:
    """Run the same request on a module of the grader's own (its target does nothing) in a fresh sandbox at
    the same level: the line of the installation's fault if it fails there at the same stage, else ""."""
    from torchgrade.sandbox.host import Sandbox, SandboxFailure

    folder = Path(tempfile.mkdtemp(prefix="torchgrade-canary-"))
    try:
        name = target if target.isidentifier() and not keyword.iskeyword(target) else "target"
        (folder / f"{exercise}.py").write_text(f"def {name}(*args, **kwargs):\n    return None\n")
        canary = Sandbox(folder, limits=sandbox.limits, level=sandbox.isolation, cuda=sandbox.cuda, warm=False)
        try:
            reply = canary.run(exercise, name, request["probe"], tuple(request["args"]), request["kwargs"],
                               request["options"], timeout=timeout, watch_dispatcher=watch, standin=standin)
        except SandboxFailure as e:  # the grader's own module cannot even be run: not the student's doing
            return line(stage, f"a run without the student's code failed too ({e})")
        finally:
            canary.close(reset=False)  # (the student's workers live on)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    again = claim(reply)
    return line(again[0], again[1]) if again is not None and again[0] == stage else ""


def reset() -> None:
    """Forget the faults met (a new grade in a long-lived process: the autograder, the tests)."""
    FAULTS.clear()
    _verdicts.clear()
