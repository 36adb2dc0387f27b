"""Probes: the scenarios a check asks for, run once on the reference and once on the student's code.

A probe receives the object under test wrapped in a ``Target`` (calling it runs that code under the
forbidden-call watch), the positional and keyword arguments the check sent, and options of its own.
It returns plain data (``describe``) that the trusted side compares. The same probe code runs the
reference in the trusted process and the student's code in the sandbox, so both are measured alike.

Probes are public: students may read them. They hold no expected values and no hidden inputs.
The built-in probes are the modules beside this one (basic.py, parallel.py); a course adds its own in its probes folder
(``probes:`` in assignment.yaml), loaded by ``load_course`` on both sides of the boundary as the
package ``course_probes``. Each registers its probes with ``@probe``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any, Callable, ContextManager

import torch

from torchgrade.base.printable import valid
from torchgrade.sandbox import recorder, standin

PROBES: dict[str, Callable[..., Any]] = {}
#: Probes that cannot run on the CUDA stand-in (``probe(standin=False)``), with the reason a report gives.
NO_STANDIN: dict[str, str] = {}
#: The package a course's probe modules are imported under (``from course_probes import x`` works between them).
COURSE_PACKAGE = "course_probes"
_course: tuple[str, tuple[str, ...]] | None = None  # (folder, names it registered)
#: Frames from these folders are harness or library frames, never shown in a student's traceback.
_HARNESS_DIRS = [os.path.dirname(os.path.dirname(torch.__file__)) + os.sep,
                 os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep]


class ProbeError(Exception):
    """The student's code returned something of the wrong kind; the message says what and why."""


class ProbeLoadError(Exception):
    """A course's probes folder could not be loaded; the message names the file and why."""


class Raised(Exception):
    """The code under test raised; carries the original exception."""

    def __init__(self, error: BaseException):
        super().__init__(error)
        self.error = error


def probe(fn: Callable[..., Any] | None = None, *, standin: str | None = None) -> Any:
    """Register a probe under its function name. ``@probe(standin="why")``: the probe cannot run on the
    CUDA stand-in (torchgrade/sandbox/standin.py), and its CUDA checks are set aside there, saying why."""
    if fn is None:
        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            NO_STANDIN[f.__name__] = standin or "it cannot run on the CUDA stand-in"
            return probe(f)
        return register
    if fn.__name__ in PROBES and PROBES[fn.__name__].__module__ != fn.__module__:
        raise ProbeLoadError(f"probe '{fn.__name__}' in {fn.__module__} is already defined in "
                             f"{PROBES[fn.__name__].__module__}; give it another name")
    PROBES[fn.__name__] = fn
    return fn


def load_course(folder: str | Path | None) -> None:
    """Import every ``*.py`` of a course's probes folder (once; another folder replaces the last one's)."""
    global _course
    key = str(Path(folder).resolve()) if folder else ""
    if _course is not None and _course[0] == key:
        return
    _forget_course()
    if not key or not os.path.isdir(key):
        _course = (key, ())
        return
    before = set(PROBES)
    _HARNESS_DIRS.append(key + os.sep)
    package = types.ModuleType(COURSE_PACKAGE)
    package.__path__ = [key]
    sys.modules[COURSE_PACKAGE] = package
    try:
        for file in sorted(Path(key).glob("*.py")):
            name = f"{COURSE_PACKAGE}.{file.stem}"
            if file.stem == "__init__" or name in sys.modules:  # imported already by a sibling
                continue
            spec = importlib.util.spec_from_file_location(name, file)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except ProbeLoadError as e:
                raise ProbeLoadError(f"{file}: {e}") from None
            except BaseException as e:  # a course's probe module that fails to import stops grading
                raise ProbeLoadError(f"{file}: {type(e).__name__}: {e}") from None
    except ProbeLoadError:
        _course = (key, tuple(set(PROBES) - before))
        _forget_course()  # nothing of a course that does not load stays registered
        raise
    _course = (key, tuple(set(PROBES) - before))


def _forget_course() -> None:
    """Unregister the loaded course's probes and modules (another course in this process, or a failed load)."""
    global _course
    for name in _course[1] if _course is not None else ():
        PROBES.pop(name, None)
    for module in [m for m in sys.modules if m == COURSE_PACKAGE or m.startswith(COURSE_PACKAGE + ".")]:
        del sys.modules[module]
    if _course is not None and _course[0] + os.sep in _HARNESS_DIRS:
        _HARNESS_DIRS.remove(_course[0] + os.sep)
    _course = None


class Target:
    """The object under test. Calling it runs its code under the watch; its exceptions become Raised."""

    def __init__(self, obj: Any, name: str, watch: Callable[[bool], ContextManager] = contextlib.nullcontext,
                 calls: dict[str, str] | None = None):
        self.obj = obj
        self.name = name
        self.watch = watch
        #: The sandbox's live record of the calls seen under `watch` (None on the trusted side); a probe
        #: that runs the target in child processes merges what they recorded into it.
        self.calls = calls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(self.obj, *args, **kwargs)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a callable of the code under test (a method, a Function's apply) under the watch: everything
        that happens inside is the target's."""
        return self._within(False, fn, args, kwargs)

    def drive(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a torch function that runs the code under test (``backward``, ``autograd.grad``, ``gradcheck``,
        ``Module.to``) under the watch: what torch's own code does is the probe's, the rest the target's."""
        return self._within(True, fn, args, kwargs)

    def _within(self, drive: bool, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        try:
            with self.watch(drive):  # (this frame is the window's edge: recorder.boundary)
                return fn(*args, **kwargs)
        except BaseException as e:  # SystemExit too: a student's sys.exit() is a result, not an exit
            raise Raised(e) from e


recorder.boundary(Target._within.__code__)


def raised(error: BaseException) -> dict:
    """Describe an exception as plain data (type name, the names it inherits, the message)."""
    try:
        message = str(error)
    except BaseException:  # a hostile __str__
        message = "<the exception's message could not be shown>"
    return {
        "__raised__": type(error).__name__,
        "mro": [k.__name__ for k in type(error).__mro__],
        "message": valid(message[:2000]),  # a name of bytes that are not UTF-8 is still a message
        "traceback": valid(own_frames(error)),
    }


def own_frames(error: BaseException) -> str:
    """The traceback of `error` without harness and library frames (what the student wrote)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(tuple(_HARNESS_DIRS))
              and not f.filename.startswith("<")]
    return "".join(f'  File "{os.path.basename(f.filename)}", line {f.lineno}, in {f.name}\n    {f.line}\n'
                   for f in frames[-8:])


def tensor(value: Any, what: str = "the result") -> torch.Tensor:
    """Require a plain torch.Tensor (a Parameter is accepted) and return it detached."""
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, standin.StandIn) and not isinstance(value, torch.nn.Parameter):
            raise ProbeError(f"{what} is a tensor subclass ({type(value).__name__}); return a plain torch.Tensor")
        with torch._C.DisableTorchFunctionSubclass():
            plain = value.detach()
        return plain
    raise ProbeError(f"{what} is a {type(value).__name__}, expected a torch.Tensor")


def describe(value: Any, what: str = "the result", depth: int = 0) -> Any:
    """Turn a result into plain data, or raise ProbeError saying what was not plain."""
    if depth > 20:
        raise ProbeError(f"{what} nests too deeply")
    if isinstance(value, torch.Tensor):
        return tensor(value, what)
    if isinstance(value, bool) or value is None or type(value) in (int, float, str, complex):
        return value
    if isinstance(value, (torch.dtype, torch.device)):
        return value
    if isinstance(value, torch.Size):
        return tuple(int(v) for v in value)
    if type(value) in (list, tuple):
        return type(value)(describe(v, f"{what}[{i}]", depth + 1) for i, v in enumerate(value))
    if type(value) is dict:
        return {str(k): describe(v, f"{what}[{k!r}]", depth + 1) for k, v in value.items()}
    raise ProbeError(f"{what} is a {type(value).__module__}.{type(value).__qualname__}, not plain data")


def run_probe(name: str, target: Target, args: tuple, kwargs: dict, options: dict, on_standin: bool = False,
              own: str | None = None) -> dict:
    """Run one probe; return {"value": ...} or {"probe_error": message}. Never raises for student faults.

    `on_standin`: the inputs are on the CUDA stand-in; the probe runs with it on, and where it met what
    the stand-in cannot model the reply says so in ``standin_unsupported`` (the check is set aside).
    With `own` (the student's folder), ``standin_origins`` names the lines that made the CPU tensors
    of the result."""
    if not on_standin:
        return _run_probe(name, target, args, kwargs, options)
    if name in NO_STANDIN:
        return {"standin_unsupported": NO_STANDIN[name]}
    with standin.active(own) as unsupported:
        try:
            outcome = _run_probe(name, target, args, kwargs, options)
        except Exception as e:
            if unsupported:  # the probe's own step met what the stand-in cannot model
                return {"standin_unsupported": unsupported[0]}
            if standin.no_cuda(str(e)):
                return {"standin_unsupported": standin.CALLS_CUDA}
            raise
        if _raised_no_cuda(outcome.get("value")):  # torch.cuda.* called: it needs a real GPU
            return {"standin_unsupported": standin.CALLS_CUDA}
        if own and "value" in outcome:  # where the CPU tensors of a device mistake were made
            lines = {standin.origin(t) for t in _tensors_in(outcome["value"]) if t.device.type == "cpu"}
            lines = sorted(lines - {None})[:3] or ([standin.blamed()] if standin.blamed() else [])
            if lines:
                outcome["standin_origins"] = lines
    if unsupported:
        return {"standin_unsupported": unsupported[0]}
    return outcome


def _raised_no_cuda(value: Any) -> bool:
    """Whether an outcome holds an exception raised for calling torch.cuda without CUDA."""
    if isinstance(value, dict):
        if "__raised__" in value:
            return standin.no_cuda(str(value.get("message", "")))
        value = list(value.values())
    return isinstance(value, (list, tuple)) and any(_raised_no_cuda(v) for v in value)


def _tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    return []


def _run_probe(name: str, target: Target, args: tuple, kwargs: dict, options: dict) -> dict:
    try:
        value = PROBES[name](target, args, kwargs, **options)
    except Raised as e:
        return {"value": raised(e.error)}
    except ProbeError as e:
        return {"probe_error": str(e)}
    try:
        return {"value": describe(value)}
    except ProbeError as e:  # what came back, by type: "expected ValueError, but the call returned a Block"
        return {"probe_error": str(e), "returned": type(value).__qualname__}
