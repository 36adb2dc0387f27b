"""The portable sandbox backend (isolation level ``process``): one fresh Python process per worker.

Used wherever the Linux mechanisms of the zygote are missing (macOS: no SOCK_SEQPACKET, no /proc,
forking after importing torch is unsafe; Windows: no fork at all), and on Linux whenever
``TORCHGRADE_ISOLATION=process``, so that the one code path students on macOS and Windows run is
the one this project's tests and CI exercise.

Trusted side (``Spawner``): starts ``python -m torchgrade.sandbox.portable`` with ``subprocess``
(the engine's own entry point; nothing is forked, nothing is pickled), talks to it over its stdin
and stdout pipes in length-prefixed frames (8 bytes of length, then one ``wire.py`` frame), and
never imports student code. One spare process is kept started ahead, torch imported, so that a
module's worker is ready about as fast as a fork of the zygote would be.

- time limits: the host's wall-clock limit per check; a worker that overruns is killed with every
  process it started (``kill_tree``: the tree as psutil sees it, and on POSIX its process group);
- memory: ``RLIMIT_AS`` where the OS accepts it (Linux); where it does not (macOS refuses it,
  Windows has no rlimits; a Job Object would need pywin32, so it is not used), a watch of the
  worker tree's resident memory (psutil, every ``WATCH_S``) that kills it past the limit. (Not
  both: resident memory counts the pages forked children share once per child.)
- CPU time and file size: ``RLIMIT_CPU``/``RLIMIT_FSIZE`` where ``resource`` exists (not on Windows:
  there only the wall-clock limit holds);
- pause/resume of an idle worker's tree: psutil's suspend/resume (SIGSTOP/SIGCONT, or
  NtSuspendProcess on Windows).

Worker side (``main``): keeps the pipes as its channel, points fds 0, 1 and 2 away from them,
imports torch, the probes and the course's probes, says it is ready, then waits for its one
assignment (a module of a submission), confines itself to its working folder and serves as
``worker.serve`` does. A watch thread ends it if the grader dies.

See SECURITY.md for what this level does not guarantee.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, BinaryIO

from torchgrade.sandbox import observer

#: Frame header: the payload's length, 8 bytes, big-endian.
_HEADER = struct.Struct("!Q")
#: How often the memory watch looks at each worker's tree.
WATCH_S = 0.1
#: The exit status reported for a worker this side killed (as subprocess reports SIGKILL on POSIX).
KILLED = -9
#: Seconds a kill waits for the processes it killed to be gone.
KILL_WAIT_S = 5.0
#: Seconds the child waits between looks at whether the grader still lives.
PARENT_WATCH_S = 1.0
#: A worker of a grader running as root moves into an IPC namespace of its own (ipc.own_namespace).
OWN_IPC = True
#: The largest frame read from a worker: wire.MAX_FRAME_BYTES, which this side of the pipes cannot import
#: without importing torch (a process that only starts workers, such as `grade -j N`'s, never does).
MAX_FRAME_BYTES = 256 * 1024 * 1024


# --- frames (both sides) -------------------------------------------------------------------------

def read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    """`size` bytes from a stream, or None at its end."""
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_frame(stream: BinaryIO, data: bytes) -> None:
    """One frame: its length, then its bytes."""
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def read_frame(stream: BinaryIO, max_bytes: int) -> bytes:
    """One frame; EOFError at the end of the stream, OSError for a frame over `max_bytes`."""
    head = read_exactly(stream, _HEADER.size)
    if head is None:
        raise EOFError
    (size,) = _HEADER.unpack(head)
    if size > max_bytes:
        raise OSError("bad message length")  # the words multiprocessing's Connection uses
    body = read_exactly(stream, size)
    if body is None:
        raise EOFError
    return body


class Channel:
    """The host's end of a worker's pipes, with the methods of multiprocessing's Connection that
    `host.Worker` uses. A thread reads frames as they come, so `poll` works on every OS (select()
    does not take pipes on Windows)."""

    def __init__(self, process: subprocess.Popen, max_bytes: int):
        self._writer = process.stdin
        self._closed = False
        self._queue: queue.Queue = queue.Queue()
        self._next: Any = None
        self._max = max_bytes
        threading.Thread(target=self._read, args=(process.stdout,), name="torchgrade-worker-reader",
                         daemon=True).start()

    def _read(self, reader: BinaryIO) -> None:
        """Frames into the queue until the end. Only this thread closes the pipe: closing it from another
        would wait for this read (held by any process of the student's that still has the pipe)."""
        end: BaseException = EOFError()
        try:
            while True:
                self._queue.put(read_frame(reader, self._max))
        except EOFError:
            pass
        except (OSError, ValueError) as e:  # too big a frame (it is not read on), or the pipe closed under us
            end = OSError(str(e))
        finally:
            with contextlib.suppress(OSError, ValueError):
                reader.close()
        self._queue.put(end)

    def poll(self, timeout: float | None = None) -> bool:
        """Whether a frame (or the end) is there within `timeout` seconds."""
        if self._next is None:
            try:
                self._next = self._queue.get(timeout=timeout)
            except queue.Empty:
                return False
        return True

    def recv_bytes(self, maxlength: int | None = None) -> bytes:
        self.poll(None)
        item = self._next
        if isinstance(item, BaseException):
            raise item  # it stays: every later read meets the same end
        self._next = None
        if maxlength is not None and len(item) > maxlength:
            raise OSError("bad message length")
        return item

    def send_bytes(self, data: bytes) -> None:
        if self._closed:
            raise OSError("the channel is closed")
        try:
            write_frame(self._writer, data)
        except (OSError, ValueError) as e:  # the worker is gone (BrokenPipeError), or we closed the pipe
            raise OSError(f"the worker's pipe is closed ({e})") from None

    def close(self) -> None:
        """No more requests. The pipe itself is closed by `_Child.kill`, after the kill: a worker that saw
        it close first would exit and leave what it started (daemons it adopted) to init, out of reach."""
        self._closed = True

    def close_pipe(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError, ValueError):
            self._writer.close()


# --- the trusted side ----------------------------------------------------------------------------

class PortableError(Exception):
    """The portable backend cannot run on this Python (what is missing, in one line)."""


#: What the portable backend (and the probes on both sides) cannot do without, by module name.
REQUIRED = {"subprocess": "to start sandbox processes", "_multiprocessing": "for the data-parallel probes",
            "psutil": "to stop and kill sandbox processes (pip install psutil)"}


def unavailable() -> str:
    """What this Python lacks that the portable backend needs, in one line ('' if nothing)."""
    import importlib.util

    missing = []
    for name, why in REQUIRED.items():
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(f"the module {name} ({why})")
    return "this Python lacks " + ", ".join(missing) if missing else ""


def _psutil():
    try:
        import psutil
    except ImportError as e:
        raise PortableError(f"the Python package psutil cannot be imported ({e}; pip install psutil)") from None
    return psutil


def tree(pid: int, stop_root: bool = True) -> list:
    """A process and all its descendants (psutil.Process objects), each stopped before its children
    are listed so that none escapes by starting more; [] if it is gone.

    A stop takes hold asynchronously (kill() returns before the process stops), so a process may still
    fork once after it was told to stop: once every process found has stopped, their children are
    listed again, until a look finds none new (a fork bomb under load left survivors otherwise)."""
    psutil = _psutil()
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return []
    found, todo, seen = [root], [root], {pid}
    while todo and len(found) < 10_000:
        process = todo.pop()
        with contextlib.suppress(psutil.Error):
            if stop_root or process is not root:
                process.suspend()
            for child in _children(process):
                if child.pid not in seen:
                    seen.add(child.pid)
                    found.append(child)
                    todo.append(child)
        if not todo:
            _wait_stopped(found if stop_root else found[1:])
            todo = [p for p in found if _has_children_besides(p, seen)]
    return found


def _wait_stopped(processes: list, timeout: float = 1.0) -> None:
    """Until each process has stopped (or ended), for `timeout` seconds at most."""
    psutil = _psutil()
    deadline = time.monotonic() + timeout
    for process in processes:
        while time.monotonic() < deadline:
            try:
                if process.status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                    break
            except psutil.Error:
                break
            time.sleep(0.002)


def _has_children_besides(process: Any, seen: set[int]) -> bool:
    psutil = _psutil()
    try:
        return any(child.pid not in seen for child in _children(process))
    except psutil.Error:
        return False


def _children(process: Any) -> list:
    """A process's children. On Linux from /proc/PID/task/*/children: psutil reads every process's stat
    for each call, and a kill of a fork bomb's tree on a busy machine then took seconds."""
    psutil = _psutil()
    if not sys.platform.startswith("linux"):
        return process.children()
    try:
        tasks = os.listdir(f"/proc/{process.pid}/task")
        pids: set[int] = set()
        for task in tasks:
            with open(f"/proc/{process.pid}/task/{task}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except FileNotFoundError as e:  # gone, or a kernel without the children files
        if not os.path.exists(f"/proc/{process.pid}"):
            raise psutil.NoSuchProcess(process.pid) from e
        return process.children()
    except (OSError, ValueError):
        return process.children()
    found = []
    for pid in sorted(pids):
        with contextlib.suppress(psutil.Error):
            child = psutil.Process(pid)
            if child.ppid() == process.pid:  # (not a pid reused since the file was read)
                found.append(child)
    return found


_kill_lock = threading.Lock()


def kill_tree(pid: int, stop_root: bool = True) -> None:
    """Kill a worker and every process it started: its tree, and on POSIX its process group too.

    One at a time (the memory watch and the host may both kill a worker): a process killed by the
    other before its children were listed would leave them to init, out of reach. `stop_root`: False
    for a launcher, which must never be left stopped (a grader killed in the middle of this would leave
    it so, unable to end the worker's tree when it sees the grader gone)."""
    psutil = _psutil()
    with _kill_lock:
        found = tree(pid, stop_root)
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
        if hasattr(os, "killpg") and pid > 1:  # a child that left the tree (setsid) but not the group
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT_S  # gone, not dying: as the zygote's waitpid makes sure
        while any(_running(p) for p in found) and time.monotonic() < deadline:
            time.sleep(0.01)


def resident_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants."""
    psutil = _psutil()
    total = 0
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total


#: The worker's parent, between it and the grader: a submission that kills its parent process
#: (os.getppid()) kills this, not the grader; the worker then ends too (its parent watch), and the host
#: sees a worker that died. It passes on how the worker ended: a signal as that signal.
#: When the grader dies (SIGTERM, SIGKILL: nothing of it runs to clean up), it kills the worker and all
#: the worker started, then itself: on Linux it is their subreaper (what the worker leaves comes here, as
#: the worker's orphans go to the worker), elsewhere what is left in its process group goes. Not
#: PR_SET_PDEATHSIG: that fires when the grader's *thread* that started it ends, not the grader.
_LAUNCHER = """
import os, signal, subprocess, sys, threading, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
grader = int(sys.argv[1])
if sys.platform.startswith("linux"):
    try:
        import ctypes
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass

def children():
    me, found = os.getpid(), set()
    try:
        for task in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{task}/children") as f:
                found.update(int(p) for p in f.read().split())
    except (OSError, ValueError):
        pass
    return found

ending = threading.Event()

def end_all():
    ending.set()  # the main thread, seeing the worker die, must not end this process before the rest go
    for _ in range(1000):  # each round kills its children; their orphans come here for the next
        found = children()
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in found:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    os.killpg(os.getpid(), signal.SIGKILL)  # what is left in its group, and itself

def watch():
    while True:
        time.sleep(0.25)
        if os.getppid() != grader:  # re-parented: the grader is gone
            end_all()

if hasattr(os, "killpg"):
    threading.Thread(target=watch, daemon=True).start()
# The pipes, handed on as the child's standard handles (on Windows nothing else is inherited).
code = subprocess.call(sys.argv[2:], stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr)
while ending.is_set():
    time.sleep(1)  # end_all ends this process
if code < 0:
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except Exception:
        pass
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


class _Child:
    """One process started ahead, torch imported; a worker once it has its assignment."""

    def __init__(self, plan: Any, env: dict[str, str], probes: str | None, later: bool = False):
        self.log = tempfile.TemporaryFile()  # what it printed before its assignment: why it failed, if it did
        #: It leaves the costly part of the warm-up to the module's code, if it needs it (warmup.LATER).
        self.later = later
        config = json.dumps({"probes": probes, "own_ipc": OWN_IPC, "later": later})
        # A process group (POSIX) or a console group (Windows) of its own: Ctrl-C is the grader's to handle.
        group = ({"start_new_session": True} if os.name == "posix"
                 else {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)})
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-S", "-c", _LAUNCHER, str(os.getpid()), sys.executable, "-m",
                 "torchgrade.sandbox.portable", config],
                env=env, cwd=plan.inbox,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, **group)
        except (OSError, ValueError) as e:
            self.log.close()
            raise PortableError(f"a Python process cannot be started here ({e})") from None
        self.channel = Channel(self.process, MAX_FRAME_BYTES)
        self.ready: dict | None = None
        self.memory_cap = 0
        #: The worker itself (the launcher's child): killed with its own tree too, in case it outlived
        #: the launcher (killed by the student's code) and so left the launcher's tree.
        self.worker: Any = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float) -> str:
        """Wait for its hello: '' once it has imported torch and the probes, else why it did not start."""
        if self.ready is not None:
            return ""
        why = ""
        try:
            if not self.channel.poll(timeout):
                why = f"it did not start within {timeout:g} s"
            else:
                hello = json.loads(self.channel.recv_bytes(65536))
                if not hello.get("probes_error"):
                    self.ready = hello
                    psutil = _psutil()
                    with contextlib.suppress(psutil.Error, TypeError, ValueError):
                        self.worker = psutil.Process(int(hello["pid"]))
                    return ""
                why = f"the course's probes could not be loaded: {hello['probes_error']}"
        except (EOFError, OSError, ValueError):
            why = self._log_tail()
        self.kill()
        return why or "it ended before it was ready"

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self.process.wait(5)
        with contextlib.suppress(OSError, ValueError):
            self.log.seek(0, os.SEEK_END)
            self.log.seek(max(0, self.log.tell() - 600))
            lines = self.log.read().decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else ""  # a traceback's last line says what went wrong
        return ""

    def kill(self) -> int | None:
        """Kill it and all it started; its exit status (KILLED if this did it)."""
        if self.process.poll() is None and self.worker is not None and not _running(self.worker):
            with contextlib.suppress(subprocess.TimeoutExpired):  # the launcher is passing on how it ended
                self.process.wait(2)
        alive = self.process.poll() is None
        kill_tree(self.pid, stop_root=False)  # (if it ended by itself, what it left in its group goes now)
        if self.worker is not None:
            with contextlib.suppress(Exception):
                if self.worker.is_running():  # compares start times: never another process with a reused pid
                    kill_tree(self.worker.pid)
        self.channel.close_pipe()
        try:
            code = self.process.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        with contextlib.suppress(OSError, ValueError):
            self.log.close()
        return KILLED if alive else code


def _running(process: Any) -> bool:
    """Whether a psutil.Process still runs (a zombie has ended)."""
    psutil = _psutil()
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Spawner:
    """The portable stand-in for `host.Zygote`: the same methods, each worker a fresh Python process."""

    def __init__(self, plan: Any, env: dict[str, str], probes: str | None, start_timeout: float,
                 later: bool = False):
        _psutil()
        self.plan = plan
        self.dead = False
        self._env, self._probes, self._start_timeout = env, probes, start_timeout
        #: Its processes leave the costly part of the warm-up until told more modules are coming (`warm`),
        #: as a zygote for a check of one module does (host.start_early).
        self._later = later
        self._lock = threading.Lock()
        self._workers: dict[int, _Child] = {}
        self._stop = threading.Event()
        #: The host's IPC objects before this submission's first worker (what is new after it is removed).
        self._leftovers: Any = None
        # No compiled observer at this level (the profiler watches), and none kept: the student's code runs as
        # this user and could write the cache, so a later run at another level must not load what is there.
        observer.forget()
        self._spare = _Child(plan, env, probes, later)
        why = self._spare.wait_ready(start_timeout)  # proves that a sandbox process can start here at all
        if why:
            raise PortableError(f"the sandbox process did not start: {why}")
        #: The watch its workers use (torchgrade.sandbox.observer).
        self.watch = str((self._spare.ready or {}).get("watch") or "")
        threading.Thread(target=self._watch_memory, name="torchgrade-memory-watch", daemon=True).start()

    def alive(self) -> bool:
        return not self.dead

    def open_worker(self, spare: bool = True, **config: Any) -> tuple[int, Channel]:
        """A worker for one module: (pid, channel); its hello is the first frame on the channel. `spare`: start
        the next process now (another module is to come, or who knows), to import torch while this one works."""
        from torchgrade.sandbox.failures import ZygoteGone

        with self._lock:
            if self.dead:
                raise ZygoteGone("the sandbox has been closed")
            if self._leftovers is None:
                from torchgrade.sandbox.ipc import Leftovers

                self._leftovers = Leftovers()
            if config.get("warm"):
                self._later = False  # more modules are coming: the next processes warm up in full
            child, self._spare = self._spare, None
            try:
                child = child or _Child(self.plan, self._env, self._probes, self._later)
            except PortableError as e:
                raise ZygoteGone(str(e)) from None
            why = child.wait_ready(self._start_timeout)
            if why:
                raise ZygoteGone(f"the sandbox process did not start: {why}")
            limits = config.get("limits") or {}
            baseline = resident_bytes(child.pid)
            try:
                child.channel.send_bytes(json.dumps(config).encode())
                if not child.channel.poll(self._start_timeout):
                    raise OSError("no answer")
                confined = json.loads(child.channel.recv_bytes(65536))
            except (EOFError, OSError, ValueError):
                child.kill()
                raise ZygoteGone("the sandbox process ended before it was given its module") from None
            if limits.get("memory_bytes") and not confined.get("memory_capped"):
                # RLIMIT_AS refused (macOS) or missing (Windows): the watch holds the limit instead, on top
                # of what the process used with torch imported, as RLIMIT_AS counts from there.
                child.memory_cap = int(limits["memory_bytes"]) + baseline
            self._workers[child.pid] = child
            if spare:
                with contextlib.suppress(PortableError):  # the next worker imports torch while this one works
                    self._spare = _Child(self.plan, self._env, self._probes, self._later)
            return child.pid, child.channel

    def warm(self) -> None:
        """From now on, processes warmed up in full (host.Zygote.warm); a spare that was not is replaced."""
        with self._lock:
            self._later = False
            if self._spare is not None and self._spare.later and not self.dead:
                self._spare.kill()
                self._spare = None
                with contextlib.suppress(PortableError):
                    self._spare = _Child(self.plan, self._env, self._probes)

    def _watch_memory(self) -> None:
        while not self._stop.wait(WATCH_S):
            for pid, child in list(self._workers.items()):
                if child.memory_cap and child.process.poll() is None and resident_bytes(pid) > child.memory_cap:
                    kill_tree(pid)  # the host sees it die: "killed by SIGKILL (often for using too much memory)"

    def reap(self, pid: int) -> int | None:
        """Kill a worker and everything it started; its exit status (None if it is not one of ours)."""
        child = self._workers.pop(pid, None)
        return None if child is None else child.kill()

    def signal_group(self, pid: int, op: str) -> dict:
        """Pause or resume a worker's whole tree, as the zygote answers (host.Zygote.signal_group):
        {"ok": False} if it is gone (or not one of ours), else {"ok": True, "processes": it started and
        are alive, "threads": its own}."""
        psutil = _psutil()
        child = self._workers.get(pid)
        if child is None or child.process.poll() is not None:
            return {"ok": False}
        if op == "pause":
            found = tree(pid)  # stops each process as it is found
            if not found:
                return {"ok": False}
            # `pid` is the launcher: the worker itself is its child, not a process the student's code started
            # (counted as one, it made every module's turn start a fresh worker, importing torch again)
            worker = child.worker.pid if child.worker is not None else None
            own = [p for p in found[1:] if p.pid == worker]
            with contextlib.suppress(psutil.Error):
                return {"ok": True, "processes": len(found) - 1 - len(own),
                        "threads": (own or found)[0].num_threads()}
            return {"ok": True}
        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            return {"ok": False}
        for process in processes:
            with contextlib.suppress(psutil.Error):
                process.resume()
        return {"ok": True}

    def reset(self) -> None:
        """Between submissions: the shared memory, semaphores and message queues it left in the host's IPC are
        removed (each worker was killed with its tree when retired, and its folder is the inbox's to remove);
        the workers of another sandbox in this process stay."""
        with self._lock:
            if self._workers or self._leftovers is None:  # another submission's workers still run here
                return
            leftovers, self._leftovers = self._leftovers, None
        leftovers.remove()

    def forget(self) -> None:
        """In a forked child of the grader: these processes are the parent's."""
        self.dead = True
        self._workers.clear()
        self._spare = None

    def close(self) -> None:
        self.dead = True
        self._stop.set()
        for child in [self._spare, *self._workers.values()]:
            if child is not None:
                child.kill()
        self._workers.clear()
        self._spare = None
        if self._leftovers is not None:
            self._leftovers.remove()
        observer.forget()  # (what this level's code could have written there is not loaded later)


# --- the sandbox side ----------------------------------------------------------------------------

def _binary(fd: int) -> int:
    if os.name == "nt":  # no newline translation on the channel
        import msvcrt

        msvcrt.setmode(fd, os.O_BINARY)
    return fd


def _die_with_parent() -> None:
    """End this process, and all it started, when its parent (the launcher) is gone (no PR_SET_PDEATHSIG
    outside Linux)."""
    from torchgrade.sandbox.zygote import kill_others  # (imported now: nothing of the student's has run yet)

    try:
        import psutil

        parent = psutil.Process(os.getppid())
    except Exception:
        return

    def watch() -> None:
        while True:
            time.sleep(PARENT_WATCH_S)
            try:  # is_running compares start times (a reused pid is not its parent); a zombie is dead too
                gone = not parent.is_running() or parent.status() == psutil.STATUS_ZOMBIE
            except Exception:
                gone = True
            if gone:
                _end_all()

    def _end_all() -> None:
        with contextlib.suppress(Exception):  # what it started (its orphans come back to it: _adopt_orphans)
            kill_others(set())
        with contextlib.suppress(Exception):  # what is left in its group
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os._exit(75)

    threading.Thread(target=watch, name="torchgrade-parent-watch", daemon=True).start()


def _adopt_orphans() -> None:
    """On Linux, be the subreaper of what it starts: a daemon that double-forks and leaves the session stays
    in this process's tree, so the host kills it with the worker. (Elsewhere such a daemon escapes.)"""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def isolate(config: dict, environment: dict[str, str]) -> None:
    """What the worker does before student code: its folder, its environment, output cut, limits."""
    from torchgrade.sandbox import worker
    from pathlib import Path

    workdir = Path(config["workdir"])
    os.chdir(workdir)
    limits = config.get("limits") or {}
    worker._output.capture(workdir, int(limits.get("output_bytes") or 0))
    os.environ.clear()
    os.environ.update({k: v for k, v in environment.items() if k != "PWD"})
    windows = ("TEMP", "TMP", "USERPROFILE") if os.name == "nt" else ()  # where Windows looks for them
    for name in ("HOME", "TMPDIR", *windows):
        os.environ[name] = str(workdir)
    for name in ("USER", "LOGNAME", *(("USERNAME",) if os.name == "nt" else ())):
        os.environ[name] = "sandbox"
    tempfile.tempdir = None  # computed again from TMPDIR: temporary files stay in the working folder
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing us
    worker.start_cuda(config)
    worker.apply_limits({k: v for k, v in limits.items() if k != "cpu_seconds"})  # where `resource` exists;
    _limit_cpu(int(limits.get("cpu_seconds") or 0))  # a limit the OS refuses (RLIMIT_AS on macOS) is skipped


def _limit_cpu(seconds: int) -> None:
    """RLIMIT_CPU from now on: this process already spent seconds importing torch (a forked worker starts at 0)."""
    from torchgrade.sandbox.worker import CPU_LIMITS_PER_WORKER, resource

    if not seconds or resource is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    with contextlib.suppress(ValueError, OSError):
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        top = used + seconds * CPU_LIMITS_PER_WORKER + 1
        top = top if hard == resource.RLIM_INFINITY else min(top, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (min(used + seconds, top), top))


def main(argv: list[str]) -> None:
    """The sandbox process: get ready, take one assignment, serve it until the host hangs up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the host's to handle
    # The channel is the pipes on fds 0 and 1; fd 1 then points at stderr (the log the host reads if
    # this fails to start), so nothing an import prints can be taken for a frame.
    channel_in = os.fdopen(_binary(os.dup(0)), "rb")
    channel_out = os.fdopen(_binary(os.dup(1)), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # `-m` put the working folder (the inbox) first on the path: nothing may be imported from there.
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    environment = dict(os.environ)
    config = json.loads(argv[1]) if len(argv) > 1 else {}
    if config.get("own_ipc") and hasattr(os, "geteuid") and os.geteuid() == 0:
        from torchgrade.sandbox import ipc

        ipc.own_namespace()  # what the submission makes in shared memory goes with its last process
    _die_with_parent()  # first: importing torch takes seconds, longer on a loaded machine

    from torchgrade.sandbox.warmup import prepare

    probes_error = prepare(config.get("probes"), later=not config.get("later"))  # as in the zygote
    if probes_error is not None:
        write_frame(channel_out, json.dumps({"ready": False, "probes_error": probes_error}).encode())
        return
    from torchgrade.sandbox import worker  # (imported by `prepare`)
    _adopt_orphans()
    from torchgrade.sandbox import observer

    write_frame(channel_out, json.dumps({"ready": True, "pid": os.getpid(), "watch": observer.name()}).encode())
    try:
        assignment = json.loads(read_frame(channel_in, 1 << 20))
    except (EOFError, OSError):
        return  # a spare nobody needed
    isolate(assignment, environment)
    write_frame(channel_out, json.dumps({"memory_capped": _memory_capped()}).encode())
    worker.serve(_PipeConnection(channel_in, channel_out), assignment)


def _memory_capped() -> bool:
    """Whether RLIMIT_AS holds here (else the host's memory watch stands in for it)."""
    from torchgrade.sandbox.worker import resource

    if resource is None:
        return False
    with contextlib.suppress(ValueError, OSError):
        return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY
    return False


class _PipeConnection:
    """The worker's end of the pipes, as `worker.serve` uses a Connection."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO):
        self.reader, self.writer = reader, writer

    def recv_bytes(self, maxlength: int) -> bytes:
        return read_frame(self.reader, maxlength)

    def send_bytes(self, data: bytes) -> None:
        write_frame(self.writer, data)


if __name__ == "__main__":
    main(sys.argv)
