"""The sandbox worker: imports one student module and runs probes on it, answering in plain data.

Runs on the untrusted side, in a process forked by the zygote. Before any student code runs it
isolates itself (its own session, the unprivileged user where there is one, no new privileges,
resource limits, a private working folder, output cut at a byte budget), then imports the
module and says how that went. Everything it sends is only a claim: the trusted side decodes it
with a loader that cannot run code and decides every verdict itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import io
import math
import os
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # Windows: no rlimits; the portable backend's host enforces what it can
    resource = None

from torchgrade.sandbox import wire
from torchgrade.sandbox.inbox import output_file
from torchgrade.sandbox import installed_state, provenance, standin
from torchgrade.sandbox.probes import _HARNESS_DIRS, Target, run_probe
from torchgrade.sandbox.linetrace import LineTrace
from torchgrade.sandbox.recorder import CallRecorder, DispatchWatch

#: A worker's CPU time in all (its hard limit) is this many times the limit of one request.
CPU_LIMITS_PER_WORKER = 50
#: The largest request the worker reads (inputs are built by trusted checks, so this is generous).
MAX_REQUEST_BYTES = 512 * 1024 * 1024


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
        self.dispatch = DispatchWatch(self.recorder)
        provenance.watch(self.submission, _HARNESS_DIRS)  # before the student's code: what is installed code
        self.module: Any = None
        self.import_failure: dict | None = None

    def watch(self, drive: bool = False) -> contextlib.AbstractContextManager:
        """One run of the student's code, recorded (see torchgrade.sandbox.recorder)."""
        return self.dispatch.window(drive)

    def load(self) -> dict:
        """Import the module (once); return the hello the host waits for: imported, or why not."""
        if self.module is None and self.import_failure is None:
            self._import()
        return {"import_error": self.import_failure} if self.import_failure is not None else {"imported": True}

    def _import(self) -> None:
        path = Path(self.submission) / f"{self.exercise}.py"
        sys.path.insert(0, self.submission)
        spec = importlib.util.spec_from_file_location(self.exercise, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[self.exercise] = module
        installed_state.settle()  # (what the sandbox changed since the warm-up is not the student's)
        try:
            spec.loader.exec_module(module)
        except BaseException as e:  # SyntaxError, ImportError, SystemExit: each costs only this file
            self.import_failure = {"type": type(e).__name__, "traceback": student_traceback(e, self.submission)}
            if isinstance(e, SyntaxError):
                self.import_failure["traceback"] = "".join(traceback.format_exception_only(type(e), e)).strip()
            return
        self.module = module

    def handle(self, request: dict) -> bytes:
        """Run one request; its reply as a frame (`wire.encode`)."""
        self.load()
        if self.import_failure is not None:
            return wire.encode({"import_error": self.import_failure})
        name = request["target"]
        if not hasattr(self.module, name):
            return wire.encode({"missing": name})
        self.recorder.reset()
        target = Target(getattr(self.module, name), name, self.watch, self.recorder.calls)
        # the audit's coverage of the reference: the lines of this module the request runs (sandbox/linetrace.py)
        trace = LineTrace(self.module.__file__) if request.get("coverage") else None
        try:
            with contextlib.ExitStack() as stack:
                fault = self._set_up(stack, request)
                if fault is not None:
                    return fault
                if trace is not None:
                    stack.enter_context(trace)
                outcome = run_probe(request["probe"], target, tuple(request["args"]), dict(request["kwargs"]),
                                    dict(request["options"]), on_standin=bool(request.get("standin")),
                                    own=self.submission)
                # The result (values, gradients) is copied into bytes while the watch is still on: what a
                # thread of the student's does to it before is seen at the dispatcher; after, never sent.
                body = _encoded(outcome)
        except BaseException as e:  # the probe itself tripped over what the student returned
            body = _encoded({"probe_error": f"{type(e).__name__}: {e}"[:2000],
                             "traceback": student_traceback(e, self.submission)})
        try:
            return wire.join(body, {"calls": dict(self.recorder.calls), **(trace.reply() if trace is not None else {})})
        except Exception:  # not a frame of wire's (its encoder replaced): sent as it is, the host refuses it
            return body

    def _set_up(self, stack: contextlib.ExitStack, request: dict) -> bytes | None:
        """Arm the call watch (torch's profiler, only where calls are forbidden: it doubles a request's cost),
        then the CUDA stand-in where asked; a failure there, before any student code of this request runs, is
        answered as the grader's (torchgrade/engine/grader_errors.py, which checks that claim without this process)."""
        watched = request.get("dispatch", True)
        if not watched:
            self.dispatch.settle()  # (a kept profiler session is not left open under code it does not watch)
        defer = request.get("defer")
        stages = (("watch", self.dispatch.armed(defer if type(defer) is str else None)
                   if watched else None),
                  ("standin", standin.active(self.submission) if request.get("standin") else None))
        for stage, manager in stages:
            if manager is None:
                continue
            try:
                stack.enter_context(manager)
            except Exception as e:
                return wire.encode({"grader_fault": {"stage": stage, "error": f"{type(e).__name__}: {e}"[:2000]}})
        return None


def _encoded(outcome: dict) -> bytes:
    try:
        return wire.encode(outcome)
    except BaseException as e:
        return wire.encode({"probe_error": f"the result could not be sent back: {type(e).__name__}: {e}"[:2000]})


def apply_limits(limits: dict, dedicated_user: bool = False) -> None:
    """Resource limits for this process and everything it starts.

    The process cap counts every process of the user, so it is set only for a user of the
    sandbox's own (a grader running as root); for anyone else it would count their other programs.
    Without `resource` (Windows) there are none; a limit the OS refuses (RLIMIT_AS on macOS) is skipped.
    """
    if resource is None:
        return

    def cap(kind: int, value: int, grace: int = 0) -> None:
        with contextlib.suppress(ValueError, OSError):
            _, hard = resource.getrlimit(kind)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            top = value + grace if hard == resource.RLIM_INFINITY else min(value + grace, hard)
            resource.setrlimit(kind, (value, top))

    cap(resource.RLIMIT_CORE, 0)  # a crash leaves no core file behind
    if limits.get("cpu_seconds"):  # SIGXCPU says which limit it was; the hard limit is for all requests
        seconds = int(limits["cpu_seconds"])
        cap(resource.RLIMIT_CPU, seconds, grace=seconds * (CPU_LIMITS_PER_WORKER - 1) + 1)
    if limits.get("memory_bytes"):
        cap(resource.RLIMIT_AS, int(limits["memory_bytes"]) + _current_address_space())
    if limits.get("file_bytes"):
        cap(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    if limits.get("processes") and dedicated_user:
        cap(resource.RLIMIT_NPROC, int(limits["processes"]))


def start_cuda(config: dict) -> None:
    """For a worker on a machine with CUDA: make its CUDA context before `apply_limits`. The driver
    reserves tens of GiB of virtual addresses when it starts, which RLIMIT_AS would refuse
    (cudaGetDeviceCount: "out of memory", seen on an H100); the limit then counts from there. A failure
    here shows again, as the grader's, in the first CUDA check."""
    if config.get("cuda"):
        import torch

        with contextlib.suppress(Exception):
            torch.zeros(1, device="cuda")


def rearm_cpu_limit(limits: dict) -> None:
    """Give the next request the whole CPU-time limit: a worker serves every check of a module, and
    what earlier checks used is not this one's (the soft limit moves up; the hard one stays)."""
    if not limits.get("cpu_seconds") or resource is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with contextlib.suppress(ValueError, OSError):
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = math.ceil(usage.ru_utime + usage.ru_stime) + int(limits["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _current_address_space() -> int:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class CappedOutput(io.RawIOBase):
    """A file descriptor that takes at most `budget` bytes (shared by stdout and stderr), then drops the rest.

    A 500 MB print is cut here, not buffered: it costs neither the grader's memory nor its disk.
    """

    def __init__(self, fd: int, budget: list[int]):
        super().__init__()
        self.fd = fd
        self.budget = budget

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        room = self.budget[0]
        if room > 0:
            chunk = view[:room]
            with contextlib.suppress(OSError):
                while chunk:
                    chunk = chunk[os.write(self.fd, chunk):]
            self.budget[0] = room - min(room, len(view))
            if self.budget[0] == 0:
                with contextlib.suppress(OSError):
                    os.write(self.fd, b"\n[output cut here: the sandbox keeps at most this much printed output]\n")
        return len(view)


class _Output:
    """Where this worker's printed output goes: one file per target, each with its own byte budget."""

    def __init__(self) -> None:
        self.folder = Path(".")
        self.limit = 2**62
        self.budget = [self.limit]
        self.target: str | None = None

    def capture(self, folder: Path, limit: int) -> None:
        """Python's stdout and stderr write to fds 1 and 2 through the byte budget; stdin is empty."""
        self.folder, self.limit = folder, limit or 2**62
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self._redirect(None)
        for name, fd in (("stdout", 1), ("stderr", 2)):
            stream = io.TextIOWrapper(io.BufferedWriter(CappedOutput(fd, self.budget)), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)

    def switch(self, target: str) -> None:
        """From now on fds 1 and 2 go to `target`'s file, with a fresh budget (a worker serves every
        target of its module, one request at a time; what a thread prints goes to the current one)."""
        if target != self.target:
            flush()
            with contextlib.suppress(OSError):  # the folder made unwritable: the output stays where it was
                self._redirect(target)

    def _redirect(self, target: str | None) -> None:
        out = os.open(self.folder / output_file(target), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        self.target = target
        self.budget[0] = self.limit


def flush() -> None:
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()


_output = _Output()


def _close_inherited_fds(keep: set[int]) -> None:
    """Close every descriptor the zygote had open except `keep` (nothing of the host's leaks in)."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38


def isolate(config: dict, user: tuple[int, int] | None, keep_fd: int, environment: dict[str, str]) -> None:
    """Everything that happens before student code: session, user, privileges, folders, limits, output."""
    zygote = os.getppid()
    os.setsid()  # own process group: the zygote stops and kills the worker and all it started in one go
    _close_inherited_fds({0, 1, 2, keep_fd})
    if user is not None:
        from torchgrade.sandbox.isolation import become

        become(user)
        _prctl(PR_SET_DUMPABLE, 1)  # its own /proc/self again (a switch of user hands that to root)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)  # no setuid program can give it privileges back
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # set after the switch of user, which clears it
    if os.getppid() != zygote:  # the zygote died before the line above
        os._exit(75)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing us
    workdir = Path(config["workdir"])
    os.chdir(workdir)
    limits = config.get("limits", {})
    _output.capture(workdir, int(limits.get("output_bytes") or 0))
    os.environ.clear()
    os.environ.update({k: v for k, v in environment.items() if k != "PWD"})  # PWD: bubblewrap's, stale
    os.environ["HOME"] = os.environ["TMPDIR"] = str(workdir)
    os.environ["USER"] = os.environ["LOGNAME"] = "sandbox"  # the sandbox user has no entry in /etc/passwd
    tempfile.tempdir = None  # computed again from TMPDIR: temporary files stay in the working folder
    hand_limits = None
    if ranks_from_a_server(config):  # its data-parallel ranks' fork server, forked now (before CUDA)
        from torchgrade.sandbox.probes.parallel import fork_rank_server

        hand_limits = fork_rank_server()
    start_cuda(config)
    apply_limits(limits, dedicated_user=user is not None)
    if hand_limits is not None:
        hand_limits()


def ranks_from_a_server(config: dict) -> bool:
    """Whether this worker's data-parallel ranks come from a fork server (``parallel.start_method``): CUDA
    ranks, and any ranks on a machine with a GPU, its CUDA hidden from the grader too. The worker then
    forks that server itself, as for CUDA ranks, instead of multiprocessing starting a fresh Python that
    imports torch again when the first rank is asked for."""
    if not config.get("ranks"):
        return False
    from torchgrade.sandbox.probes.parallel import start_method

    return bool(config.get("cuda")) or start_method("cpu") == "forkserver"


def start(sock_fd: int, config: dict, user: tuple[int, int] | None = None,
          environment: dict[str, str] | None = None) -> None:
    """Entry point in the freshly forked child: isolate, import the module, then serve until the host hangs up."""
    from multiprocessing.connection import Connection

    isolate(config, user, sock_fd, dict(os.environ) if environment is None else environment)
    serve(Connection(sock_fd), config)


def serve(conn: Any, config: dict) -> None:
    """Import the module, say how that went, then answer requests until the host hangs up (`conn`: a
    Connection, or the portable backend's pipes)."""
    session = Session(Path(config["submission"]), config["exercise"])
    hello = session.load()
    flush()
    conn.send_bytes(wire.encode(hello))
    while True:
        try:
            request = wire.decode(conn.recv_bytes(MAX_REQUEST_BYTES))
        except (EOFError, OSError):
            os._exit(0)
        except Exception as e:  # inputs this process cannot make (CUDA unusable here): the grader's fault
            conn.send_bytes(wire.encode({"sandbox_error": f"{type(e).__name__}: {e}"[:2000]}))
            continue
        if request.get("findings"):  # the deferred findings of the requests so far (recorder.DispatchWatch)
            frame = wire.encode({"findings": session.dispatch.findings()})
        else:
            _output.switch(request["target"])
            rearm_cpu_limit(config.get("limits", {}))
            frame = session.handle(request)
        flush()
        conn.send_bytes(frame)
