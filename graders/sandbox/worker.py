"""The sandbox worker: imports one student module and runs probes on it, answering in plain data.

Runs on the untrusted side, in a process forked by the zygote. Everything it sends is only a claim:
the trusted side decodes it with a loader that cannot run code and decides every verdict itself.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import resource
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Iterator

from torch.overrides import TorchFunctionMode

from . import wire
from .probes import Target, run_probe

#: The largest request the worker reads (inputs are built by trusted checks, so this is generous).
MAX_REQUEST_BYTES = 512 * 1024 * 1024
OUTPUT_FILE = "output.log"


class CallRecorder(TorchFunctionMode):
    """Records every torch function and Tensor method the student's code calls, with its first line."""

    def __init__(self, submission: str):
        super().__init__()
        self.submission = submission
        self.calls: dict[str, str] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", None) or repr(func)
        if name in ("__get__", "__set__"):  # a property: name it by the attribute
            name = getattr(getattr(func, "__self__", None), "__name__", name)
        if name not in self.calls:
            self.calls[name] = self._student_line()
        return func(*args, **(kwargs or {}))

    def _student_line(self) -> str:
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(self.submission):
                return f"{os.path.basename(filename)}:{frame.f_lineno}"
            frame = frame.f_back
        return ""


def student_traceback(error: BaseException, submission: str) -> str:
    """The traceback trimmed to frames in the student's own files."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith(submission)]
    lines = [f'  File "{os.path.basename(f.filename)}", line {f.lineno}, in {f.name}\n    {f.line or ""}' for f in frames]
    try:
        last = "".join(traceback.format_exception_only(type(error), error)).strip()
    except BaseException:
        last = type(error).__name__
    return "\n".join(lines + [last])


class Session:
    """One student module inside the sandbox, imported on first use."""

    def __init__(self, submission: Path, exercise: str):
        self.submission = str(submission.resolve()) + os.sep
        self.exercise = exercise
        self.recorder = CallRecorder(self.submission)
        self.module: Any = None
        self.import_failure: dict | None = None

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        with self.recorder:
            yield

    def load(self) -> None:
        if self.module is not None or self.import_failure is not None:
            return
        path = Path(self.submission) / f"{self.exercise}.py"
        sys.path.insert(0, self.submission)
        spec = importlib.util.spec_from_file_location(self.exercise, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[self.exercise] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as e:  # SyntaxError, ImportError, SystemExit: each costs only this file
            self.import_failure = {"type": type(e).__name__, "traceback": student_traceback(e, self.submission)}
            if isinstance(e, SyntaxError):
                self.import_failure["traceback"] = "".join(traceback.format_exception_only(type(e), e)).strip()
            return
        self.module = module

    def handle(self, request: dict) -> dict:
        self.load()
        if self.import_failure is not None:
            return {"import_error": self.import_failure}
        name = request["target"]
        if not hasattr(self.module, name):
            return {"missing": name}
        self.recorder.calls.clear()
        target = Target(getattr(self.module, name), name, self.watch)
        try:
            outcome = run_probe(request["probe"], target, tuple(request["args"]), dict(request["kwargs"]),
                                dict(request["options"]))
        except BaseException as e:  # the probe itself tripped over what the student returned
            outcome = {"probe_error": f"{type(e).__name__}: {e}"[:2000],
                       "traceback": student_traceback(e, self.submission)}
        outcome["calls"] = dict(self.recorder.calls)
        return outcome


def apply_limits(limits: dict) -> None:
    """Resource limits for this process and everything it starts."""
    def cap(kind: int, value: int) -> None:
        with contextlib.suppress(ValueError, OSError):
            soft, hard = resource.getrlimit(kind)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(kind, (value, value))

    if limits.get("cpu_seconds"):
        cap(resource.RLIMIT_CPU, int(limits["cpu_seconds"]))
    if limits.get("memory_bytes"):
        cap(resource.RLIMIT_AS, int(limits["memory_bytes"]) + _current_address_space())
    if limits.get("file_bytes"):
        cap(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    if limits.get("processes"):
        cap(resource.RLIMIT_NPROC, int(limits["processes"]))


def _current_address_space() -> int:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def start(sock_fd: int, config: dict) -> None:
    """Entry point in the freshly forked child: isolate, limit, then serve until the host hangs up."""
    os.setsid()  # own process group: the host kills the worker and all it started in one go
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing us
    workdir = Path(config["workdir"])
    os.chdir(workdir)
    out = os.open(workdir / OUTPUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    apply_limits(config.get("limits", {}))
    conn = Connection(sock_fd)
    session = Session(Path(config["submission"]), config["exercise"])
    while True:
        try:
            request = wire.decode(conn.recv_bytes(MAX_REQUEST_BYTES))
        except (EOFError, OSError):
            os._exit(0)
        reply = session.handle(request)
        try:
            frame = wire.encode(reply)
        except BaseException as e:
            frame = wire.encode({"probe_error": f"the result could not be sent back: {type(e).__name__}: {e}"[:2000]})
        sys.stdout.flush()
        sys.stderr.flush()
        conn.send_bytes(frame)
