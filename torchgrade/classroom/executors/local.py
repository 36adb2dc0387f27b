"""Executors on this machine: this process (-j 1), or a pool of worker processes (-j N).

Pool workers are started once (forked from a clean fork server, not from this process, which has
threads) and each grades many submissions, keeping its collected checks and its cache of reference
outcomes (see torchgrade.engine.session and torchgrade.engine.differential). At most N submissions are handed out at a time, so
when a worker dies (`BrokenProcessPool`: the pool is then unusable) the submissions in flight are
exactly the suspects. Each suspect is graded again alone, in a one-worker pool: one that kills
that pool too gets `Crashed`; the others get their grades, and the class goes on in a fresh pool.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterator, TypeVar

from torchgrade.classroom.submissions import Submission
from torchgrade.classroom.executors.outcomes import Crashed, Job, Outcome

T = TypeVar("T")

DIED = ("the grading process died while grading this submission, twice (the second time graded alone), "
        "so it is not graded; the rest of the class was")


class InProcess:
    """Grades in this process, one submission after another."""

    def run(self, job: Job, submissions: list[Submission]) -> Iterator[Outcome]:
        for s in submissions:
            yield s, job(s)


#: The pid of the process that starts the fork server, for the fork server to die with it.
OWNER_ENV = "TORCHGRADE_POOL_OWNER"
#: The run the fork server prepares its workers for (JSON: the assignment's path and the device).
SESSION_ENV = "TORCHGRADE_POOL_SESSION"
PR_SET_PDEATHSIG = 1


def _in_fork_server() -> bool:
    """Whether this import is the fork server's preload (its main loop is on the stack)."""
    from multiprocessing import forkserver

    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


def _bind_fork_server() -> None:
    """In the fork server (this module is preloaded there): die at once with the process that started
    it, by a death signal, rather than after an interpreter teardown of seconds (torch is loaded)."""
    owner = os.environ.get(OWNER_ENV)
    if owner is None or owner != str(os.getppid()) or not sys.platform.startswith("linux") or not _in_fork_server():
        return  # not the fork server: the pool's owner, or a worker (those watch the owner themselves)
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if str(os.getppid()) != owner:  # the owner died before the signal was armed
        os._exit(1)


def _prepare_workers() -> None:
    """In the fork server: pay once, for every worker forked from it, what each would pay on its own
    (and each data-parallel rank a worker forks, again): torch's lazy imports (the sandbox's warm-up
    list), and the run's checks configured and collected (torchgrade.classroom.batch's session). Both start no
    thread, so forking afterwards is safe. What fails here is done again, and reported, by the workers."""
    if not _in_fork_server():
        return
    from torchgrade.sandbox.warmup import importing, warm_up

    with importing():  # and frozen: no worker's collector walks what it inherits
        warm_up()
        spec = os.environ.get(SESSION_ENV)
        if spec:
            with contextlib.suppress(Exception):
                from torchgrade.engine.session import open_session
                from torchgrade.engine.config import load_assignment

                path, device = json.loads(spec)
                open_session(load_assignment(path), device, ())


_bind_fork_server()
_prepare_workers()


def _context() -> multiprocessing.context.BaseContext:
    """Workers are forked from multiprocessing's fork server, a clean process (no threads, nothing of
    this one) that imports torch and the engine once for all of them: a worker then starts in
    milliseconds, where a spawned one spends a second of CPU importing torch again."""
    # A death signal fires when the *thread* that started the process ends: only the main thread
    # lives as long as this process, so the fork server is bound only when started from it.
    if threading.current_thread() is threading.main_thread():
        os.environ[OWNER_ENV] = str(os.getpid())
    else:
        os.environ.pop(OWNER_ENV, None)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torchgrade.classroom.executors.local", "torchgrade.engine.session"])
    return context


def start_fork_server(assignment_path: str | os.PathLike | None = None, device: str = "all") -> None:
    """Start the fork server now, so that its imports run beside what this process does before it makes
    the pool (its workers then start from it; the environment they get is this process's now). Given the
    run (its assignment and device), it also collects the checks once for all its workers."""
    from multiprocessing import forkserver

    if assignment_path is not None:  # read by the fork server as it starts, and by nothing after
        os.environ[SESSION_ENV] = json.dumps([str(assignment_path), device])
    try:
        _context()
        forkserver.ensure_running()
    finally:
        os.environ.pop(SESSION_ENV, None)


def call_in_fork_server(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a process forked from the fork server, which has torch and the engine
    imported: this process then need not import torch to ask something of the course."""
    with ProcessPoolExecutor(1, mp_context=_context()) as pool:
        return pool.submit(function, *args).result()


def _watch_parent(parent: int) -> None:
    """End this worker the moment `parent` (the process that made the pool) ends, however it ends.

    The worker's own parent is the fork server, so a death signal (PR_SET_PDEATHSIG) would fire on
    the wrong death; a pidfd of the pool's owner becomes readable when it exits. What the worker
    started ends with it: its sandbox zygote stops when its control socket closes, bubblewrap by
    --die-with-parent."""
    import select

    try:
        fd = os.pidfd_open(parent)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfds (not Linux 5.3+): look every half second
        def poll() -> None:
            while os.getppid() != 1:
                try:
                    os.kill(parent, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=poll, name="torchgrade-parent-watch", daemon=True).start()
        return

    def wait() -> None:
        select.select([fd], [], [])
        os.kill(os.getpid(), signal.SIGKILL)  # at once: no cleanup that could wait on the dead parent

    threading.Thread(target=wait, name="torchgrade-parent-watch", daemon=True).start()


def _settings() -> dict[str, str]:
    """This process's TORCHGRADE_* settings now (the fork server's environment is the one it started with)."""
    return {k: v for k, v in os.environ.items() if k.startswith("TORCHGRADE_") and k not in (OWNER_ENV, SESSION_ENV)}


def _init_worker(parent: int, settings: dict[str, str]) -> None:
    # Ctrl-C reaches the whole foreground process group: the parent handles it (and ends the pool);
    # a worker printing its own KeyboardInterrupt traceback would only bury the parent's message.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in _settings():
        del os.environ[name]
    os.environ.update(settings)  # the run's settings, as the process that made the pool has them
    _watch_parent(parent)
    import torch

    torch.set_num_threads(1)  # N workers on N cores: more threads each would only contend
    from torchgrade.engine import session  # noqa: F401  (imported before the fork: each worker's is warm)
    from torchgrade.sandbox.host import start_early

    start_early()


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """Kill a pool's workers now (the interpreter's exit would otherwise wait for their submissions)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            process.kill()


class Pool:
    """A pool of `jobs` worker processes that survives the death of any of them."""

    #: Its workers see this machine's files (they share the reference side: torchgrade.classroom.batch.share_reference).
    shares_files = True

    def __init__(self, jobs: int):
        self.jobs = jobs

    def _pool(self, workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, mp_context=_context(), initializer=_init_worker,
                                   initargs=(os.getpid(), _settings()))

    def run(self, job: Job, submissions: list[Submission]) -> Iterator[Outcome]:
        queue = deque(submissions)
        while queue:
            suspects = yield from self._run_until_broken(job, queue)
            yield from self._run_alone(job, suspects)

    def _run_alone(self, job: Job, suspects: list[Submission]) -> Iterator[Outcome]:
        """Grade each suspect alone in a one-worker pool, so that a death is that submission's."""
        pool = None
        try:
            for s in suspects:
                pool = pool or self._pool(1)
                future = pool.submit(job, s)
                try:
                    error = future.exception()
                except BaseException:
                    _kill_workers(pool)
                    raise
                if isinstance(error, BrokenProcessPool):
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = None
                    yield s, Crashed(DIED)
                elif error is not None:
                    raise error
                else:
                    yield s, future.result()
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    def _run_until_broken(self, job: Job, queue: deque) -> Iterator[Outcome]:
        """Grade from the queue until it is empty (returns []) or a worker dies (returns the suspects)."""
        pool = self._pool(min(self.jobs, len(queue)))
        inflight: dict[Future, Submission] = {}
        suspects: list[Submission] = []

        def refill() -> None:
            while queue and len(inflight) < self.jobs:
                s = queue.popleft()
                inflight[pool.submit(job, s)] = s

        try:
            refill()
            while inflight:
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                finished = []
                for future in done:
                    s = inflight.pop(future)
                    error = future.exception()
                    if isinstance(error, BrokenProcessPool):
                        suspects.append(s)
                    elif error is not None:
                        raise error
                    else:
                        finished.append((s, future.result()))
                if not suspects:
                    refill()  # before the caller writes these grades' files: no worker waits for that
                yield from finished
                if suspects:
                    # The pool is broken: what is still in flight either finished or is a suspect too.
                    for future, s in inflight.items():
                        if future.exception() is None:
                            yield s, future.result()
                        else:
                            suspects.append(s)
                    inflight.clear()
                    return suspects
            return []
        except BaseException:  # interrupted (Ctrl-C, SIGTERM, an error): nothing waits for the work in flight
            _kill_workers(pool)
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
