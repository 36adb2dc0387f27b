"""The trusted side of the sandbox: starts sandbox processes, sends requests, enforces the time limit.

Nothing here imports or calls student code. Replies are decoded by ``wire.decode`` (msgpack:
plain types and tensors only) and their text fields are type-checked and cut to size; a worker that hangs is
killed with its whole process group, one that dies is reported with how it died, and the next
request for that module gets a fresh worker. A worker is stopped (SIGSTOP, with every process it
started) while another module's worker runs, so nothing it left running competes with the module
being graded.

One zygote per trusted process and isolation level (``isolation.LEVELS``) forks the workers. If the
zygote dies (a submission may kill it), it is started again, and a request whose worker died with
it is sent once more: the other targets of the submission, and the next submissions, keep their
marks.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from torchgrade.sandbox.forbidden import TAMPERED
from torchgrade.sandbox import inbox, isolation, observer
from torchgrade.sandbox.failures import BadReply, Died, SandboxFailure, Timeout, ZygoteGone
from torchgrade.sandbox.exits import describe_exit
from torchgrade.sandbox.inbox import output_file
from torchgrade.sandbox.isolation import IsolationError, Plan
from torchgrade.sandbox.linetrace import MAX_LINES

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding `torchgrade/`
#: What a request's findings say when its worker ended before the grader read what the call ran.
LOST = ("ended its sandbox process before the grader could read what this call ran (the grader could not read "
        "what this call ran, so it cannot vouch for its result)")
#: A lost request's findings (`settle`): its check fails, and is not a forbidden call (engine/plugin.py).
LOST_FINDINGS = {TAMPERED: LOST}
#: The course probes folder sandboxes load (set by `use_course`; inherited by pool workers).
COURSE_ENV = "TORCHGRADE_COURSE_PROBES"
#: Environment variables a sandbox process may see; everything else (tokens, CI secrets) is dropped.
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
             # Windows: Python and torch need these to load their DLLs and find the system at all
             "SYSTEMROOT", "WINDIR", "PATHEXT", "COMSPEC", "NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE")
#: How much of a target's printed output is kept for the report.
OUTPUT_KEEP_BYTES = 8 * 1024
#: Seconds a zygote may take to start (it imports torch) and to answer one request.
ZYGOTE_START_S = 180.0
ZYGOTE_ANSWER_S = 60.0
#: Text in a reply (messages, tracebacks) is cut to this many characters; a call record to this many names.
MAX_TEXT = 8000
MAX_CALLS = 10_000
#: A worker switched away from with more threads than this is ended rather than stopped (torch's own
#: threads are a few; a crowd of them counts against the next module's process cap).
THREADS_KEPT = 32
_SIGKILL = getattr(signal, "SIGKILL", 9)  # Windows has no SIGKILL; the portable backend reports its kills as -9

__all__ = ["BadReply", "Died", "IsolationError", "Limits", "Sandbox", "SandboxFailure", "Timeout",
           "isolation_level"]


@dataclass(frozen=True)
class Limits:
    """Resource limits for each sandbox worker (0 means none)."""

    #: CPU seconds one check may use in its worker (a backstop to the wall-clock time limit per check).
    cpu_seconds: int = 120
    #: Address space a worker may add on top of what the zygote already mapped.
    memory_bytes: int = 4 * 1024**3
    #: The largest file a worker may write.
    file_bytes: int = 64 * 1024**2
    #: Printed output (stdout and stderr together) kept per worker; the rest is dropped.
    output_bytes: int = 1024**2
    #: Processes and threads of the sandbox user (applied only when it is a user of its own: as root).
    processes: int = 512


def sandbox_env(plan: Plan) -> dict[str, str]:
    """The whole environment of a sandbox process: a few harmless variables, nothing else."""
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    env.update(PYTHONPATH=str(_PACKAGE_ROOT), PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1",
               HOME=plan.inside, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    # Who it is, by name: getpass.getuser() (torch calls it) reads these, and on Windows has no other way.
    env.update(USER="sandbox", LOGNAME="sandbox", **({"USERNAME": "sandbox"} if os.name == "nt" else {}))
    return env


class Zygote:
    """A clean process with torch imported that forks sandbox workers on request (`level_only`: one that
    only proves that the sandbox and its user work at this level, then ends; it imports nothing)."""

    def __init__(self, plan: Plan, level_only: bool = False, later: bool = False):
        self.plan = plan
        self.dead = False
        self._lock = threading.Lock()
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        probes = os.environ.get(COURSE_ENV) or None
        prefix = plan.prefix
        if probes and prefix:  # the course's probes, read-only, and nothing else of the course
            prefix += ("--ro-bind", probes, isolation.COURSE_PROBES)
        # The compiled watch, if built: sealed in memory, no path of ours inside (torchgrade.sandbox.observer)
        watch = None if level_only else observer.sealed()
        config = {"observer": f"/proc/self/fd/{watch}" if watch is not None else None,
                  "user": list(plan.user) if plan.user else None, "clean": list(plan.clean),
                  "clean_all": plan.clean_all, "level_only": level_only, "own_ipc": not plan.prefix,
                  "shm_bytes": isolation.TMPFS_BYTES, "later": later,
                  "probes": (isolation.COURSE_PROBES if plan.prefix else probes) if probes else None}
        self._log = tempfile.TemporaryFile()  # the zygote's own output: why it failed to start, if it did
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "torchgrade.sandbox.zygote", str(theirs.fileno()), json.dumps(config)],
            pass_fds=[theirs.fileno(), *([watch] if watch is not None else [])], env=sandbox_env(plan), cwd=plan.inbox, stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=self._log, start_new_session=True,
        )
        theirs.close()
        if watch is not None:
            os.close(watch)
        try:
            hello = self._receive(ZYGOTE_START_S)
        except ZygoteGone:
            why = self._log_tail()
            self.close()
            raise ZygoteGone(f"the sandbox ({plan.level}) did not start: {why}") from None
        if hello.get("probes_error"):
            self.close()
            raise ZygoteGone(f"the course's probes could not be loaded: {hello['probes_error']}")
        if not hello.get("user_ok", True):
            self.close()
            raise ZygoteGone(f"the sandbox user cannot run Python here: {hello.get('why')}")
        #: The watch its workers use ("compiled observer" or "profiler": torchgrade.sandbox.observer).
        self.watch = str(hello.get("watch") or observer.PROFILER)

    def _log_tail(self) -> str:
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - 600))
        return self._log.read().decode(errors="replace").strip() or "no output"

    def alive(self) -> bool:
        return not self.dead and self.process.poll() is None

    def _receive(self, timeout: float) -> dict:
        self.control.settimeout(timeout)
        try:
            reply = self.control.recv(65536)
        except OSError:  # socket.timeout included
            reply = b""
        if not reply:
            self._kill()
            raise ZygoteGone("the sandbox zygote has stopped")
        return json.loads(reply)

    def _ask(self, request: dict, fds: list[int] = ()) -> dict:
        with self._lock:
            if self.dead:
                raise ZygoteGone("the sandbox zygote has stopped")
            try:
                socket.send_fds(self.control, [json.dumps(request).encode()], list(fds))
            except OSError:
                self._kill()
                raise ZygoteGone("the sandbox zygote has stopped") from None
            return self._receive(ZYGOTE_ANSWER_S)

    def _kill(self) -> None:
        """The zygote is gone or stuck: make sure of it (its workers die with it), and reap it."""
        self.dead = True
        try:
            self.process.kill()
            self.process.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def open_worker(self, spare: bool = True, **config: Any) -> tuple[int, Any]:
        """Fork a worker for one module: (pid, Connection); its hello is the first frame on the connection.
        (`spare` is the portable backend's, which starts processes ahead: a zygote forks on demand.)"""
        from multiprocessing.connection import Connection

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = int(self._ask({"op": "spawn", **config}, [theirs.fileno()])["pid"])
        finally:
            theirs.close()
        conn = Connection(os.dup(ours.fileno()))
        ours.close()
        return pid, conn

    def reap(self, pid: int) -> int | None:
        """Kill a worker and everything it started; its exit code (None if the zygote is gone too)."""
        try:
            return self._ask({"op": "reap", "pid": pid}).get("exitcode")
        except ZygoteGone:
            return None

    def signal_group(self, pid: int, op: str) -> dict:
        """Pause or resume a worker's process group: {"ok": False} if it (or the zygote) is gone, else
        {"ok": True, "processes": it started and are alive, "threads": its own}."""
        try:
            return self._ask({"op": op, "pid": pid})
        except ZygoteGone:
            return {"ok": False}

    def warm(self) -> None:
        """Have it import the costly part of its warm-up now, if it has not (warmup.LATER): more than
        one module is to be graded (a spawn with warm=True does the same, after forking its worker)."""
        try:
            self._ask({"op": "warm"})
        except ZygoteGone:
            pass

    def reset(self) -> None:
        """Between submissions: kill whatever is left and empty the private temporary folders."""
        try:
            self._ask({"op": "reset"})
        except ZygoteGone:
            pass

    def forget(self) -> None:
        """In a forked child of the grader: this zygote is the parent's."""
        self.control.close()

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill()
        self.dead = True
        self._log.close()


_zygotes: dict[str | None, Any] = {}  # a Zygote, or at level process a portable.Spawner
_chosen: dict[str | None, Plan] = {}
_zygote_lock = threading.Lock()
#: The live zygotes of the courses graded before this one (by probes folder, the latest last), kept for when
#: the process turns to that course again (a worker of a cluster, a session of tests): starting one imports
#: torch, seconds of CPU. Each holds no student code: a sandbox resets its zygote when it closes.
_resting: dict[str, dict[str | None, Any]] = {}
RESTING_COURSES = 2


def _every_zygote() -> list[Any]:
    return [*_zygotes.values(), *(z for kept in _resting.values() for z in kept.values())]


def _forget_zygotes() -> None:
    """In a child forked from a trusted process: the parent's zygotes are the parent's to use."""
    global _zygote_lock
    for z in _every_zygote():
        z.forget()
    _zygotes.clear()
    _resting.clear()
    _chosen.clear()
    _zygote_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, where nothing forks
    os.register_at_fork(after_in_child=_forget_zygotes)


def warm_zygotes() -> None:
    """Warm every live zygote of this process (`Zygote.warm`): a session that grades again and again
    (`check --watch`) wants workers that need not import the costly part themselves."""
    with _zygote_lock:
        live = [z for z in _zygotes.values() if z.alive()]  # (a Zygote, or at level process a Spawner)
    for z in live:
        z.warm()


def close_all() -> None:
    """Close every zygote of this process (with them, every worker and what it started)."""
    with _zygote_lock:
        for z in _every_zygote():
            z.close()
        _zygotes.clear()
        _resting.clear()
        _chosen.clear()


def use_course(probes_dir: str | Path | None) -> None:
    """Sandboxes started from now on load this course's probes folder. The zygotes of the course before rest
    (`_resting`: those of the latest `RESTING_COURSES` courses are kept, older ones closed); this course's
    own, if they rest, are taken up again."""
    value = str(Path(probes_dir).resolve()) if probes_dir and Path(probes_dir).is_dir() else ""
    if os.environ.get(COURSE_ENV, "") == value:  # already this course's: no wait for a zygote now starting
        return  # (`zygote` holds the lock while one starts, seconds; a course is set only from the main thread)
    with _zygote_lock:
        previous = os.environ.get(COURSE_ENV, "")
        if previous == value:
            return
        os.environ[COURSE_ENV] = value
        live = {}
        for level, z in _zygotes.items():
            if z.alive():
                live[level] = z
            else:
                z.close()
        _zygotes.clear()
        if live:
            _resting[previous] = live
        _zygotes.update(_resting.pop(value, {}))
        while len(_resting) > RESTING_COURSES:
            for z in _resting.pop(next(iter(_resting))).values():
                z.close()


def zygote(requested: str | None = None, later: bool = False) -> Zygote:
    """The zygote for this isolation level (None: the best that works), started again if it died;
    `later`: one started now leaves the costly part of its warm-up until told (see `start_early`)."""
    with _zygote_lock:
        current = _zygotes.get(requested)
        box = inbox.path()
        if current is not None and current.alive() and current.plan.inbox == box:
            return current
        if current is not None:
            current.close()
        plan = _chosen.get(requested)
        if plan is not None and plan.inbox != box:  # the inbox went away and was made anew: plan for the new one
            del _chosen[requested]
            plan = None
        _zygotes[requested] = _start(plan, later=later) if plan is not None else _start_best(requested, later=later)
        return _zygotes[requested]


def settle(requested: str | None = None) -> str:
    """Start this process's sandbox (None: the best level that starts) and return its level; it is kept
    as the sandbox of that level too, for a run that then demands that level (IsolationError if none starts)."""
    started = zygote(requested)
    with _zygote_lock:
        _zygotes.setdefault(started.plan.level, started)
        _chosen.setdefault(started.plan.level, started.plan)
    return started.plan.level


def choose_level(requested: str | None = None) -> str:
    """The level a pool of graders is to demand: the best that starts here (None) or the one asked for,
    proven by a sandbox that starts and ends at once (at the Linux levels it imports nothing, so a
    parent that grades nothing itself does not pay for torch there); IsolationError if none starts."""
    started = _start_best(requested, level_only=True)
    started.close()
    return started.plan.level


def _start(plan: Plan, level_only: bool = False, later: bool = False) -> Any:
    """A zygote that forks workers (Linux), or at level process the portable backend that starts each."""
    if plan.level != "process":
        return Zygote(plan, level_only, later)
    from torchgrade.sandbox import portable

    probes = None if level_only else os.environ.get(COURSE_ENV) or None  # a proof of the level loads no course
    try:
        return portable.Spawner(plan, sandbox_env(plan), probes, ZYGOTE_START_S, later)
    except portable.PortableError as e:
        raise ZygoteGone(f"the sandbox ({plan.level}) did not start: {e}") from None


_early: tuple[threading.Event, list[Exception]] | None = None


def start_early(probes_dir: str | Path | None = None, one_module: bool = False) -> None:
    """Start this process's zygote in the background (it imports torch: seconds), so that it is ready
    when the first check needs it; a failure to start is reported by `started` or by `zygote`.
    `probes_dir`: the course's probes folder, which the zygote loads (else the one set before, if any:
    a zygote started for another folder rests (`use_course`), and one for this folder is used or started).
    `one_module`: this process checks one module (`torchgrade check tensors.view`): the zygote leaves
    the costly part of its warm-up until it is told more is coming (see `Zygote.warm`).

    The starting thread then waits for good: bubblewrap's --die-with-parent (PR_SET_PDEATHSIG) ends
    the sandbox when the *thread* that started it ends.
    """
    global _early
    if probes_dir is not None:
        use_course(probes_dir)
    done, failed = _early = threading.Event(), []

    def start() -> None:
        try:
            zygote(isolation.requested_level(), later=one_module)
        except Exception as e:  # IsolationError: no level could start
            failed.append(e)
        done.set()
        threading.Event().wait()

    threading.Thread(target=start, name="torchgrade-sandbox-start", daemon=True).start()


def started() -> None:
    """Wait for what `start_early` began; IsolationError, in one line, if no sandbox could start."""
    if _early is None:
        return
    done, failed = _early
    done.wait()
    if failed:
        why = " ".join(str(failed[0]).split())
        raise failed[0] if isinstance(failed[0], IsolationError) else IsolationError(why)


def _start_best(requested: str | None, level_only: bool = False, later: bool = False) -> Zygote:
    reasons = []
    for plan in isolation.plans(requested):
        if plan.prefix:
            why = isolation.probe_bwrap(plan, sandbox_env(plan))
            if why:
                reasons.append(f"{plan.level}: {why}")
                continue
        try:
            started = _start(plan, level_only, later)
        except (SandboxFailure, OSError) as e:  # OSError: a socket type or call this OS lacks
            reasons.append(f"{plan.level}: {e}")
            continue
        _chosen[requested] = plan
        if reasons and requested is None:
            print(f"torchgrade: grading with isolation {plan.level!r}; what failed first: {'; '.join(reasons)}",
                  file=sys.__stderr__)
        return started
    want = requested or "any level"
    raise IsolationError(f"no sandbox could be started at {want} ({'; '.join(reasons) or 'not available here'}"
                         f"{'' if requested is None else f'; unset {isolation.ENV_VAR} to use the best available'})")


def isolation_level(requested: str | None = None) -> str:
    """The isolation level graded under: the running zygote's, or the one a sandbox would get now."""
    plan = _chosen.get(requested)
    if plan is not None:
        return plan.level
    for plan in isolation.plans(requested):
        if not plan.prefix or isolation.probe_bwrap(plan, sandbox_env(plan)) is None:
            return plan.level
    return "none"


def _text(value: Any, what: str) -> str:
    if type(value) is not str:
        raise BadReply(f"the sandbox sent {what} as a {type(value).__name__}, not as text")
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + " [...cut]"


def _check_raised(value: Any) -> None:
    """An exception described in a result must be described as probes do: names and text only."""
    if isinstance(value, dict):
        if "__raised__" in value:
            _text(value["__raised__"], "an exception's type")
            _text(value.get("message", ""), "an exception's message")
            _text(value.get("traceback", ""), "an exception's traceback")
            mro = value.get("mro", [])
            if type(mro) is not list or any(type(m) is not str for m in mro):
                raise BadReply("the sandbox sent an exception's type names as something other than text")
        for item in value.values():
            _check_raised(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_raised(item)


def checked(reply: Any) -> dict:
    """A decoded reply with its text fields type-checked and cut to size; BadReply if it has the wrong shape."""
    if type(reply) is not dict:
        raise BadReply(f"the sandbox sent back a {type(reply).__name__}, not an outcome")
    for key in ("probe_error", "sandbox_error", "traceback", "missing", "returned"):
        if key in reply:
            reply[key] = _text(reply[key], key)
    if "import_error" in reply:
        failure = reply["import_error"]
        if type(failure) is not dict:
            raise BadReply("the sandbox sent an import error that is not a description")
        reply["import_error"] = {"type": _text(failure.get("type", ""), "an import error's type")[:200],
                                 "traceback": _text(failure.get("traceback", ""), "an import error's traceback")}
    if "calls" in reply:
        calls = reply["calls"]
        if type(calls) is not dict or len(calls) > MAX_CALLS:
            raise BadReply("the sandbox sent a call record that is not a table of names")
        reply["calls"] = {_text(k, "a call's name")[:300]: _text(v, "a call's place")[:300] for k, v in calls.items()}
    for key in ("lines", "lines_repeated"):
        lines = reply.get(key, [])
        if type(lines) is not list or len(lines) > MAX_LINES or any(type(n) is not int for n in lines):
            raise BadReply("the sandbox sent the lines a request ran as something other than line numbers")
    if "lines_elsewhere" in reply and type(reply["lines_elsewhere"]) is not bool:
        raise BadReply("the sandbox sent whether code ran elsewhere as something other than yes or no")
    _check_raised(reply.get("value"))
    return reply


class Worker:
    """One sandbox process serving the targets of one student module, one request at a time."""

    def __init__(self, zygote: Any, submission: str, exercise: str, workdir: Path, limits: Limits,
                 timeout: float, cuda: bool = False, ranks: bool = False, warm: bool = True, spare: bool = True):
        self.zygote = zygote
        self.exercise = exercise
        self.workdir = workdir
        #: The targets it has run a request for (each printed into a file of its own).
        self.served: set[str] = set()
        self.paused = False
        #: It waited, stopped, for this request: whatever killed it then was not its own code.
        self.resumed = False
        self.closed = False
        #: The tokens of its requests whose profiler findings it has not yet sent (Sandbox: `defer`).
        self.deferred: list[str] = []
        #: The longest time limit of those requests (reading the findings gets as long).
        self.longest = 0.0
        self.pid, self.conn = zygote.open_worker(workdir=zygote.plan.path(workdir), submission=submission,
                                                 exercise=exercise, limits=asdict(limits), cuda=cuda, ranks=ranks,
                                                 warm=warm, spare=spare)
        self.hello = self._receive(timeout, importing=True)

    def pause(self) -> bool:
        """Stop it and everything it started until its next request (another module's turn); False if
        it left processes or a crowd of threads running, which would count against the next module's
        process cap (the caller then ends it)."""
        if not self.paused and not self.closed:
            answer = self.zygote.signal_group(self.pid, "pause")
            self.paused = bool(answer.get("ok"))
            if answer.get("processes", 0) > 0 or answer.get("threads", 0) > THREADS_KEPT:
                return False
        return True

    def usable(self) -> bool:
        """Whether this worker can take another request: its zygote lives and so does it (resumed if paused)."""
        if not self.zygote.alive():
            return False
        if self.paused:
            self.paused = not self.zygote.signal_group(self.pid, "resume").get("ok")
            self.resumed = not self.paused
            return self.resumed
        return True

    def request(self, message: dict, timeout: float) -> dict:
        """Send one request; return the decoded reply or raise a SandboxFailure."""
        from torchgrade.sandbox import wire  # (imports torch; this module does not, so a zygote can start first: start_early)

        self.served.add(message["target"])
        try:
            self.conn.send_bytes(wire.encode(message))
        except OSError:
            raise self._failure(Died, "the sandbox process {exit}") from None
        try:
            return self._receive(timeout, importing=False)
        finally:
            self.resumed = False

    def findings(self) -> dict[str, dict[str, str]]:
        """The deferred findings it holds (token → calls); a SandboxFailure if it cannot send them."""
        from torchgrade.sandbox import wire

        try:
            self.conn.send_bytes(wire.encode({"findings": True}))
        except OSError:
            raise self._failure(Died, "the sandbox process {exit}") from None
        reply = self._receive(max(self.longest, 10.0), importing=False)
        found = reply.get("findings")
        if type(found) is not dict or len(found) > MAX_CALLS:
            raise self._failure(BadReply, "the sandbox sent its watch's findings as something other than a table")
        try:
            return {_text(token, "a request's token"): checked({"calls": calls})["calls"] for token, calls in found.items()}
        except SandboxFailure as e:
            raise self._failure(BadReply, str(e)) from None

    def _receive(self, timeout: float, importing: bool) -> dict:
        from torchgrade.sandbox import wire

        module = f"{self.exercise}.py"
        try:
            if not self.conn.poll(timeout):
                what = f"importing {module} took longer than" if importing else "timed out after"
                raise self._failure(Timeout, f"{what} {timeout:g} s (the time limit of one check)")
            frame = self.conn.recv_bytes(wire.MAX_FRAME_BYTES)
        except (EOFError, OSError) as e:
            if "bad message length" in str(e):
                raise self._failure(BadReply, f"the reply exceeds the {wire.MAX_FRAME_BYTES} byte limit") from None
            what = f"importing {module} ended the sandbox process: it {{exit}}" if importing else "the sandbox process {exit}"
            raise self._failure(Died, what) from None
        try:
            return checked(wire.decode(frame))
        except SandboxFailure as e:
            raise self._failure(BadReply, str(e)) from None
        except wire.WireError as e:
            raise self._failure(BadReply, str(e)) from None

    def _failure(self, kind: type[SandboxFailure], message: str) -> SandboxFailure:
        """Kill the worker, then build the failure: how it ended, and whether it may have been collateral
        damage: the zygote died with it, or it was killed (SIGKILL, by another process of the same
        submission) while it waited, stopped, and had just been woken for this request."""
        code = self.close()
        failure = kind(message.replace("{exit}", describe_exit(code)))
        failure.collateral = self.zygote.dead or (kind is Died and self.resumed and code == -_SIGKILL)
        return failure

    def close(self) -> int | None:
        """Kill the worker and everything it started; return how it ended."""
        if self.closed:
            return None
        self.closed = True
        self.conn.close()
        return self.zygote.reap(self.pid)


class Sandbox:
    """A submission's code behind the process boundary: one worker per student module, made on demand.

    A worker serves every target of its module (forking and importing once per target would cost
    more than most checks). A failure is still charged to one target only: when a worker that
    already ran another target times out, dies or answers nonsense, the request is run again in a
    worker of its own, and only a failure there counts. A worker is stopped, with all it started,
    while another module's worker runs.
    """

    def __init__(self, submission: Path, limits: Limits = Limits(), level: str | None = None, cuda: bool = False,
                 ranks: frozenset[str] = frozenset(), warm: bool = True, defer: bool = False,
                 modules: Iterable[str] | None = None):
        self.submission = Path(submission).resolve()
        #: Where the profiler watches, read what it saw once per worker, not per request: a reply then has
        #: ``deferred``, a token whose findings `settle` gives (a module's worker is read before another
        #: module's runs, and before it is closed).
        self.defer = defer
        #: Each deferred request, by its token: (module, request, time limit), for a second run if lost.
        self._asked: dict[str, tuple[str, dict, float]] = {}
        #: Deferred findings read so far (token → calls), and the tokens whose worker ended before.
        self.findings: dict[str, dict[str, str]] = {}
        self._lost: list[str] = []
        #: More than one module may be graded: the zygote imports the costly part of its warm-up at the
        #: first worker, after forking it (zygote.py); a check of one module does not wait for it.
        self.warm = warm
        #: The modules it is to grade, where known (None: not known). At level process the next module's
        #: process is started ahead only while one of them has yet to have its first worker: after the last,
        #: one more would import torch for nothing (and compete with that module's checks for the CPU).
        self.modules = None if modules is None else frozenset(modules)
        self._started: set[str] = set()
        self.limits = limits
        #: Its workers may use CUDA (they start it before their limits, which would refuse it: worker.start_cuda).
        self.cuda = cuda
        #: The modules whose workers fork their data-parallel ranks' fork server before starting CUDA
        #: (probes.parallel.fork_rank_server); on a machine without CUDA ranks are forked directly.
        self.ranks = ranks
        self.requested = level if level is not None else isolation.requested_level()
        if self.requested is not None and self.requested not in isolation.LEVELS:
            raise IsolationError(f"unknown isolation level {self.requested!r} (expected one of {isolation.LEVELS})")
        #: The live worker of each module.
        self.workers: dict[str, Worker] = {}
        #: What the student's code printed: by "module.py while importing" and by "module.target"; only
        #: what it printed before the first hidden check (`hidden_output` has the rest: the instructor's).
        self.output: dict[str, str] = {}
        self.hidden_output: dict[str, str] = {}
        #: Since the first hidden request: how far each output file (by worker folder) had been read then.
        self._hidden_from: dict[Path, dict[str, int]] | None = None
        #: Modules whose import hung or killed the process: their other targets fail at once, alike.
        self.import_failures: dict[str, SandboxFailure] = {}
        #: Targets that took the zygote down on every try: their other checks fail at once, alike.
        self.wreckers: dict[str, SandboxFailure] = {}
        self._zygote: Any = None
        self._home: Path | None = None
        self._spawned = 0
        self._running: Worker | None = None

    @property
    def watch(self) -> str:
        """The watch of torch's dispatcher its workers use (torchgrade.sandbox.observer)."""
        return (getattr(self._zygote, "watch", None) or observer.PROFILER) if self._zygote is not None else ""

    @property
    def isolation(self) -> str:
        """The isolation level this submission was graded under (see torchgrade.sandbox.isolation)."""
        if self._zygote is not None:
            return self._zygote.plan.level
        return isolation_level(self.requested)

    def run(self, exercise: str, target: str, probe: str, args: tuple, kwargs: dict, options: dict,
            timeout: float, watch_dispatcher: bool = True, standin: bool = False,
            hidden: bool = False, coverage: bool = False) -> dict:
        """Run a probe on the student's `exercise.target`; the reply is plain data (see probes.run_probe).

        `watch_dispatcher`: also record what runs at torch's dispatcher (the profiler, recorder.py), for a
        target that may not call something; a target free to call anything needs only the plain record.
        `standin`: run it on the CUDA stand-in (sandbox/standin.py), for a CUDA check where there is no CUDA.
        `hidden`: a hidden check's request: from the first one on, whatever the submission prints, in
        any of its processes, is the instructor's (`hidden_output`), for it may hold hidden inputs.
        `coverage`: the reply also says which lines of the module the request ran (``lines``: the audit's
        coverage of the reference, sandbox/linetrace.py)."""
        key = f"{exercise}.{target}"
        if hidden and self._hidden_from is None:
            self._hide_output_from_now()
        request = {"target": target, "probe": probe, "args": list(args), "kwargs": dict(kwargs),
                   "options": dict(options), "dispatch": watch_dispatcher, "standin": standin}
        if coverage:
            request["coverage"] = True
        return self._send(exercise, request, timeout, defer=self.defer and watch_dispatcher and not coverage)

    def _send(self, exercise: str, request: dict, timeout: float, defer: bool = False) -> dict:
        key, target = f"{exercise}.{request['target']}", request["target"]
        retried = False
        while True:
            failure = self.import_failures.get(exercise) or self.wreckers.get(key)
            if failure is not None:
                raise type(failure)(str(failure))
            worker = self._worker_for(exercise)
            shared = worker is not None and bool(worker.served - {target})
            try:
                if worker is None:
                    worker = self._spawn(exercise, timeout)
                token = None
                if any(self._asked[t][1]["target"] != target for t in worker.deferred if t in self._asked):
                    # another target's verdicts are read before this one runs: a request of this target that
                    # ends the worker loses only its own target's (`settle`)
                    self._read(worker)
                    if worker.closed:
                        continue
                if defer and worker.zygote.watch == observer.PROFILER:  # (the compiled observer reads at once)
                    token = request["defer"] = secrets.token_hex(8)
                reply = worker.request(request, timeout)
                reply.pop("deferred", None)
                if token is not None and "calls" in reply:  # the probe ran: the watch's verdict waits
                    worker.deferred.append(token)
                    worker.longest = max(worker.longest, timeout)
                    self._asked[token] = (exercise, {k: v for k, v in request.items() if k != "defer"}, timeout)
                    reply["deferred"] = token
                return reply
            except SandboxFailure as e:
                self._retire(exercise)
                if (e.collateral or shared) and not retried:  # not necessarily this target's doing: once more, alone
                    retried = True
                    continue
                if e.collateral:  # twice: it is what kills the zygote, and is not run again
                    e = type(e)(f"{e}; it took the whole sandbox down with it (did it kill its parent process?)")
                    self.wreckers[key] = e
                if isinstance(e, (Timeout, Died)) and str(e).startswith("importing "):
                    self.import_failures[exercise] = e
                raise e from None

    def _worker_for(self, exercise: str) -> Worker | None:
        """The module's live worker, running (the one that ran before is stopped), or None."""
        worker = self.workers.get(exercise)
        if self._running is not None and self._running is not worker:
            self._read(self._running)  # (its module's requests have ended, for now)
        if self._running is not None and self._running is not worker and not self._running.pause():
            self._retire(self._running.exercise)  # one module's leftovers never starve the next module
        self._running = worker
        if worker is not None and not worker.usable():  # killed while it waited: not its own doing
            self._retire(exercise)
            return None
        return worker

    def _spawn(self, exercise: str, timeout: float) -> Worker:
        self._zygote = zygote(self.requested)
        if self._home is None or not self._home.is_dir():  # (gone with the inbox: staged again in the new one)
            self._home = inbox.new_home()
            inbox.stage(self.submission, self._home / "submission")
        self._spawned += 1
        self._started.add(exercise)
        workdir = inbox.workdir(self._home, f"{exercise}.{self._spawned}", self._zygote.plan.user)
        submission = self._zygote.plan.path(self._home / "submission")
        try:
            worker = Worker(self._zygote, submission, exercise, workdir, self.limits, timeout, self.cuda,
                            exercise in self.ranks, self.warm,
                            spare=self.modules is None or not self.modules <= self._started)
        except SandboxFailure:
            self._collect_output(exercise, workdir, ())
            raise
        self.workers[exercise] = self._running = worker
        return worker

    def _read(self, worker: Worker) -> None:
        """A live worker's deferred findings into `findings` (those of a worker that ends first are lost)."""
        tokens, worker.deferred = worker.deferred, []
        if not tokens or worker.closed:
            self._lost += tokens
            return
        try:
            found = worker.findings()
        except SandboxFailure:
            found = {}
            self._retire(worker.exercise)
        for token in tokens:
            if token in found:
                self.findings[token] = found[token]
                del self._asked[token]  # (its inputs are not needed again)
            else:
                self._lost.append(token)

    def settle(self) -> dict[str, dict[str, str]]:
        """Every deferred request's findings (token → calls). A request whose worker ended before they were
        read (a later request of its own target crashed it or timed out: another target's request reads them
        first) is never run again: a second run's record would vouch for a result it did not make, and could
        be told apart from the first (what that one left in the sandbox). Its findings say the watch was lost
        (a forbidden call, charged to that request's check)."""
        for worker in list(self.workers.values()):
            self._read(worker)
        while self._lost:
            token = self._lost.pop(0)
            self._asked.pop(token, None)
            self.findings[token] = dict(LOST_FINDINGS)
        return self.findings

    def _retire(self, exercise: str) -> None:
        worker = self.workers.pop(exercise, None)
        if worker is self._running:
            self._running = None
        if worker is not None:
            self._lost += worker.deferred
            worker.deferred = []
            worker.close()
            self._collect_output(exercise, worker.workdir, worker.served)

    def _collect_output(self, exercise: str, workdir: Path, targets: Iterable[str]) -> None:
        """What a worker printed while importing, then while running each target, kept under their keys
        (in `hidden_output` once a hidden check has run: only what its files gained since)."""
        start = None if self._hidden_from is None else self._hidden_from.get(workdir, {})
        for key, name in _output_files(exercise, targets):
            text, _ = _tail(workdir / name, 0 if start is None else start.get(name, 0))
            into = self.output if start is None else self.hidden_output
            if text:
                into[key] = into.get(key, "") + text

    def _hide_output_from_now(self) -> None:
        """Before the first hidden request: what the live workers printed so far is the student's; their
        files are read up to here, and whatever comes after goes to `hidden_output`."""
        self._hidden_from = {}
        for exercise, worker in self.workers.items():
            read = self._hidden_from[worker.workdir] = {}
            for key, name in _output_files(exercise, worker.served):
                text, read[name] = _tail(worker.workdir / name)
                if text:
                    self.output[key] = self.output.get(key, "") + text

    def close(self, reset: bool = True) -> None:
        """Stop every worker, kill what they left behind (not with `reset` False: another sandbox's workers
        run beside, torchgrade/engine/grader_errors.py), and remove the submission's folders."""
        for exercise in list(self.workers):
            self._retire(exercise)
        if reset and self._zygote is not None and self._zygote.alive():
            self._zygote.reset()
        if self._home is not None:
            inbox.remove(self._home)


def _output_files(exercise: str, targets: Iterable[str]) -> list[tuple[str, str]]:
    """(key, file name) of what a module's worker printed while importing, then per target."""
    return [(f"{exercise}.py while importing", output_file(None))] + \
        [(f"{exercise}.{t}", output_file(t)) for t in sorted(targets)]


def _tail(path: Path, start: int = 0) -> tuple[str, int]:
    """The last OUTPUT_KEEP_BYTES of a file a sandbox wrote, from byte `start` on (all of it if it has
    shrunk since), and its size; ('', 0) if it is missing or not a plain file."""
    size = 0
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:  # not a link to a file it may not read
                return "", 0
            f.seek(0, os.SEEK_END)
            size = f.tell()
            start = start if start <= size else 0
            f.seek(max(start, size - OUTPUT_KEEP_BYTES))
            text = f.read(OUTPUT_KEEP_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return "", 0
    if size - start > OUTPUT_KEEP_BYTES:
        text = f"[... {size - start - OUTPUT_KEEP_BYTES} earlier bytes cut ...]\n" + text
    return text, size
