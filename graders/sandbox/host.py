"""The trusted side of the sandbox: starts sandbox processes, sends requests, enforces the time limit.

Nothing here imports or calls student code. Replies are decoded by ``wire.decode`` (a weights-only
load of plain types); a worker that hangs is killed with its whole process group, one that dies is
reported with how it died, and the next request for that target gets a fresh worker.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from . import wire
from .worker import OUTPUT_FILE

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding `graders/`
#: Environment variables a sandbox process may see; everything else (tokens, CI secrets) is dropped.
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
#: How much of a target's printed output is kept for the report.
OUTPUT_KEEP_BYTES = 8 * 1024


class SandboxFailure(Exception):
    """The student's process did not answer: it timed out, died, or sent something that is not plain data."""


class Timeout(SandboxFailure):
    """No answer within the time limit."""


class Died(SandboxFailure):
    """The worker process ended while running a request."""


class BadReply(SandboxFailure):
    """The worker answered with something the trusted side refuses to decode."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for each sandbox worker (0 means none)."""

    #: CPU seconds a worker may use in total (a backstop to the wall-clock time limit per check).
    cpu_seconds: int = 120
    #: Address space a worker may add on top of what the zygote already mapped.
    memory_bytes: int = 4 * 1024**3
    #: The largest file a worker may write.
    file_bytes: int = 64 * 1024**2
    #: Processes the sandbox user may run (only meaningful for an unprivileged user).
    processes: int = 0


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {"SIGSEGV": " (a segmentation fault)", "SIGKILL": " (killed, often for using too much memory)",
                "SIGXCPU": " (it used up its CPU-time limit)", "SIGABRT": " (aborted)"}.get(name, "")
        return f"was killed by {name}{hint}"
    return f"exited with status {code} (did the code call sys.exit(), os._exit() or kill its process?)"


class Zygote:
    """A clean process with torch imported that forks sandbox workers on request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        env.update(PYTHONPATH=str(_PACKAGE_ROOT), PYTHONDONTWRITEBYTECODE="1", HOME=tempfile.gettempdir(),
                   OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "graders.sandbox.zygote", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], env=env, cwd=tempfile.gettempdir(), stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def _ask(self, request: dict, fds: list[int] = ()) -> dict:
        with self._lock:
            socket.send_fds(self.control, [json.dumps(request).encode()], list(fds))
            reply = self.control.recv(65536)
        if not reply:
            raise SandboxFailure("the sandbox zygote has stopped")
        return json.loads(reply)

    def spawn(self, sock: socket.socket, **config: Any) -> int:
        return int(self._ask({"op": "spawn", **config}, [sock.fileno()])["pid"])

    def reap(self, pid: int) -> int | None:
        try:
            return self._ask({"op": "reap", "pid": pid}).get("exitcode")
        except (OSError, SandboxFailure):
            return None

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def zygote() -> Zygote:
    """The process-wide zygote, started on first use and restarted if it died."""
    global _zygote
    with _zygote_lock:
        if _zygote is None or not _zygote.alive():
            _zygote = Zygote()
        return _zygote


class Worker:
    """One sandbox process serving one target of one submission."""

    def __init__(self, submission: Path, exercise: str, workdir: Path, limits: Limits):
        self.workdir = workdir
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.zygote = zygote()
        try:
            self.pid = self.zygote.spawn(theirs, workdir=str(workdir), submission=str(submission),
                                         exercise=exercise, limits=asdict(limits))
        finally:
            theirs.close()
        self.conn = Connection(os.dup(ours.fileno()))
        ours.close()

    def request(self, message: dict, timeout: float) -> dict:
        """Send one request; return the decoded reply or raise a SandboxFailure."""
        try:
            self.conn.send_bytes(wire.encode(message))
            if not self.conn.poll(timeout):
                self.close()
                raise Timeout(f"timed out after {timeout:g} s")
            frame = self.conn.recv_bytes(wire.MAX_FRAME_BYTES)
        except (EOFError, OSError) as e:
            code = self.close()
            raise Died(f"the sandbox process {_describe_exit(code)}") from None
        try:
            reply = wire.decode(frame)
        except wire.WireError as e:
            self.close()
            raise BadReply(str(e)) from None
        if type(reply) is not dict:
            raise BadReply("the reply is not a dict")
        return reply

    def close(self) -> int | None:
        """Kill the worker and everything it started; return how it ended."""
        self.conn.close()
        return self.zygote.reap(self.pid)


class Sandbox:
    """A submission's code behind the process boundary: one worker per target, made on demand."""

    def __init__(self, submission: Path, limits: Limits = Limits()):
        self.submission = Path(submission).resolve()
        self.limits = limits
        self.root = Path(tempfile.mkdtemp(prefix="torchgrade-sandbox-"))
        self.workers: dict[str, Worker] = {}
        self.output: dict[str, str] = {}
        self._spawned = 0

    def run(self, exercise: str, target: str, probe: str, args: tuple, kwargs: dict, options: dict,
            timeout: float) -> dict:
        """Run a probe on the student's `exercise.target`; the reply is plain data (see probes.run_probe)."""
        key = f"{exercise}.{target}"
        worker = self.workers.get(key)
        if worker is None:
            self._spawned += 1
            workdir = self.root / f"{key}.{self._spawned}"
            workdir.mkdir()
            worker = self.workers[key] = Worker(self.submission, exercise, workdir, self.limits)
        request = {"target": target, "probe": probe, "args": list(args), "kwargs": dict(kwargs),
                   "options": dict(options)}
        try:
            return worker.request(request, timeout)
        except SandboxFailure:
            self._retire(key)
            raise

    def _retire(self, key: str) -> None:
        worker = self.workers.pop(key)
        worker.close()
        self._collect_output(key, worker.workdir)

    def _collect_output(self, key: str, workdir: Path) -> None:
        path = workdir / OUTPUT_FILE
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - OUTPUT_KEEP_BYTES))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return
        if size > OUTPUT_KEEP_BYTES:
            text = f"[... {size - OUTPUT_KEEP_BYTES} earlier bytes cut ...]\n" + text
        if text:
            self.output[key] = self.output.get(key, "") + text

    def close(self) -> None:
        """Stop every worker and remove the private working directories."""
        for key in list(self.workers):
            self._retire(key)
        shutil.rmtree(self.root, ignore_errors=True)
