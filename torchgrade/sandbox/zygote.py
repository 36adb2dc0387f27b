"""The zygote: a clean process that imports torch once, then forks one sandbox worker per request.

Runs on the untrusted side of the boundary but before any student code: it never imports the
reference, the checks or a submission. Forking from it costs milliseconds instead of the second
a fresh Python needs to import torch, so every student module can have its own process.

It is the child subreaper of everything it forks: a process a worker started and left behind
(a double-forked daemon) is re-parented here, not to init, and is killed at the next request.
Under bubblewrap it also runs in its own pid namespace, so nothing outlives it.

Protocol on the control socket (SOCK_SEQPACKET, one JSON message per packet):
  on start -> {"ready": true, "pid": N, "user_ok": bool, "why": "..."}
  {"op": "spawn", "workdir", "submission", "exercise", "limits"} + the worker's socket as SCM_RIGHTS
      -> {"pid": N}
  {"op": "reap", "pid": N} -> kills N's process group, waits -> {"exitcode": code}
      (negative: killed by that signal, as in subprocess)
  {"op": "pause" | "resume", "pid": N} -> stops or continues N and all it started
      -> {"ok": bool, "processes": how many it started that are alive, "threads": N's own}
  (reap, pause and resume refuse any pid that is not one of its workers)
  {"op": "reset"} -> kills every process left, empties the private temporary folders, removes the System V
      IPC objects the sandbox user made -> {"ok": true}
  {"op": "warm"} -> {"ok": true}, then the costly part of the warm-up (warmup.LATER), once: as a spawn with
      "warm": true does after it has forked the worker (more than one module is to be graded)

The zygote's own configuration (argv[2], JSON): {"user": [uid, gid] or null, "clean": [folders],
"clean_all": bool} from ``isolation.Plan``, "own_ipc": whether to make an IPC namespace of its own (without
bubblewrap), "probes": the course's probes folder or null, and "later": whether the costly part of the
warm-up waits for a "warm" (a check of one module).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import shutil
import signal
import socket
import sys

from torchgrade.sandbox import ipc, keyrings
from torchgrade.sandbox.isolation import become

PR_SET_CHILD_SUBREAPER = 36


def children(pid: int | None = None) -> set[int]:
    """The pids of a process's children (of this one: workers, and orphans re-parented to it)."""
    me = os.getpid() if pid is None else pid
    pids: set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as f:
                pids.update(int(p) for p in f.read().split())
        return pids
    except OSError:
        if pid is not None:
            return pids
    try:
        entries = os.listdir("/proc")  # kernels without /proc/PID/task/TID/children
    except OSError:
        return pids
    for entry in entries:
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                    pids.add(int(entry))
    return pids


def signal_tree(pid: int, sig: int) -> set[int]:
    """Send `sig` to a worker's process group, then to every descendant that left it (setsid); return them all.

    For SIGSTOP each process is stopped before its children are listed, so none escapes by forking.
    """
    os.killpg(pid, sig)
    seen, todo = {pid}, [pid]
    while todo and len(seen) < 10_000:
        for child in children(todo.pop()) - seen:
            seen.add(child)
            todo.append(child)
            with contextlib.suppress(OSError):
                os.kill(child, sig)
    return seen


def threads(pid: int) -> int:
    """How many threads a process has (0 if it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def kill_tree(pid: int) -> None:
    """SIGKILL a process and its process group."""
    if pid <= 1:  # killpg(1) would be kill(-1): every process this one may signal
        return
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def kill_others(keep: set[int]) -> None:
    """Kill and reap every child not in `keep`; theirs are re-parented here and go in the next round."""
    for _ in range(1000):
        others = children() - keep
        if not others:
            return
        for pid in others:
            kill_tree(pid)
        for pid in others:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def clean(folders: list[str], uid: int | None, everything: bool) -> None:
    """Empty the private temporary folders: entirely, or only what the sandbox user owns."""
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                if not everything and entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)


#: The keys in this user's keyrings when the zygote started (the grader's own user: bubblewrap without root).
_keys: keyrings.Keys | None = None


def clean_ipc(user: tuple[int, int] | None) -> None:
    """Remove the System V IPC objects and POSIX message queues the sandbox user made (every one, in a
    namespace of the zygote's own), and the keys of its keyrings (sandbox/keyrings.py; the grader's own
    user: the keys added since the zygote started): as that user, in a child (the zygote may not remove
    another user's objects)."""
    pid = os.fork()
    if pid == 0:
        try:
            if user is not None:
                become(user)
                keyrings.clear()
            elif _keys is not None:
                _keys.remove()
            ipc.remove_owned(os.geteuid())
        finally:
            os._exit(0)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def check_user(user: tuple[int, int] | None) -> str:
    """Whether a worker that switched to `user` can still read Python, torch and graders ('' if so)."""
    if user is None:
        return ""
    # where torch and torchgrade are, without importing them (a zygote that only proves its level does not)
    packages = [os.path.dirname(importlib.util.find_spec(name).origin) for name in ("torch", "torchgrade")]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        why = ""
        try:
            become(user)
            for path in (os.path.dirname(os.__file__), *packages, *[p for p in sys.path if os.path.isdir(p)]):
                if not os.access(path, os.R_OK | os.X_OK):
                    why = f"{path} is not readable by uid {user[0]}"
                    break
        except BaseException as e:
            why = f"{type(e).__name__}: {e}"
        os.write(write, why.encode()[:4000])
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        why = f.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return why


def serve(control: socket.socket, config: dict, environment: dict[str, str]) -> None:
    """Answer requests until the host closes the control socket, then kill everything and clean up.

    `environment` is the zygote's environment before it imported anything: every worker starts
    from it, not from what imports set since (torch sets cache folders, shared by all workers).
    """
    with contextlib.suppress(Exception):  # without it, orphans go to init and are killed by pid namespace only
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if config.get("own_ipc"):  # (bubblewrap made them): what workers share is not the host's, nor another grader's
        ipc.own_namespace()
        if ipc.private_posix_shm(int(config.get("shm_bytes") or 0) or 256 * 1024**2):
            config = {**config, "clean": [f for f in config.get("clean", []) if f != ipc.POSIX_SHM]}
            config["clean_private"] = [ipc.POSIX_SHM]
            ipc.mount_queues()  # (in that mount namespace) its POSIX message queues, listed to be removed
    user = tuple(config["user"]) if config.get("user") else None
    global _keys
    _keys = keyrings.Keys() if user is None else None  # (the sandbox user's keys are every one of them)
    if user is not None and not config.get("level_only"):
        clean_ipc(user)  # what an earlier grader's submission left in the sandbox user's keyrings, before any code runs
    if config.get("level_only"):  # a grader that only learns the level: the sandbox and its user work
        why = check_user(user)
        control.send(json.dumps({"ready": True, "pid": os.getpid(), "user_ok": not why, "why": why}).encode())
        return
    from torchgrade.sandbox.warmup import import_later, prepare

    # Imports torch, and torch's lazy imports: the cost every worker then shares. Frozen: the
    # collector never walks what workers inherit (fewer copy-on-write page faults too). For a check of
    # one module ("later"), the costliest wait until the host says more is coming (a spawn or "warm"
    # with "warm": true), and come after the reply, while the worker runs.
    cold = bool(config.get("later"))
    probes_error = prepare(config.get("probes"), later=not cold, observer=config.get("observer"))
    if probes_error is not None:
        control.send(json.dumps({"ready": False, "probes_error": probes_error}).encode())
        return
    from torchgrade.sandbox import observer, worker

    why = check_user(user)
    control.send(json.dumps({"ready": True, "pid": os.getpid(), "user_ok": not why, "why": why,
                             "watch": observer.name()}).encode())
    workers: set[int] = set()
    try:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(control, 65536, 1)
            except OSError:
                return
            if not message:
                return
            request = json.loads(message)
            op = request.get("op")
            if op == "spawn":
                kill_others(workers)
                pid = os.fork()
                if pid == 0:
                    control.close()
                    try:
                        worker.start(fds[0], request, user, environment)
                    finally:
                        os._exit(70)
                for fd in fds:
                    os.close(fd)
                workers.add(pid)
                reply = {"pid": pid}
            elif op in ("reap", "pause", "resume") and int(request.get("pid", 0)) not in workers:
                reply = {"error": "not a worker of this zygote", "exitcode": None, "ok": False}  # never signal others
            elif op == "reap":
                pid = int(request["pid"])
                kill_tree(pid)
                try:
                    _, status = os.waitpid(pid, 0)
                    reply = {"exitcode": os.waitstatus_to_exitcode(status)}
                except ChildProcessError:
                    reply = {"exitcode": None}
                workers.discard(pid)
                kill_others(workers)
            elif op in ("pause", "resume"):
                pid = int(request["pid"])
                ended, status = os.waitpid(pid, os.WNOHANG)
                if ended:  # killed while it waited (by a process of the same student)
                    workers.discard(pid)
                    kill_tree(pid)
                    reply = {"ok": False, "exitcode": os.waitstatus_to_exitcode(status)}
                else:
                    try:
                        tree = signal_tree(pid, signal.SIGSTOP if op == "pause" else signal.SIGCONT)
                        # What it left running besides itself (processes, threads) counts against the
                        # sandbox user's process cap: the host ends such a worker rather than keep it.
                        reply = {"ok": True, "processes": len(tree) - 1, "threads": threads(pid)}
                    except (ProcessLookupError, PermissionError):
                        reply = {"ok": False}
            elif op == "warm":
                reply = {"ok": True}
            elif op == "reset":
                kill_others(workers)
                if not workers:  # no other submission is being graded by this zygote right now
                    clean(config.get("clean", []), user[0] if user else None, bool(config.get("clean_all")))
                    clean(config.get("clean_private", []), None, True)
                    clean_ipc(user)
                reply = {"ok": True}
            else:
                reply = {"error": f"unknown op {op!r}"}
            for fd in fds if op != "spawn" else ():
                os.close(fd)
            try:
                control.send(json.dumps(reply).encode())
            except OSError:
                return
            if cold and (op == "warm" or request.get("warm")):
                import_later()
                cold = False
    finally:
        kill_others(set())
        clean(config.get("clean", []), user[0] if user else None, bool(config.get("clean_all")))
        clean(config.get("clean_private", []), None, True)
        clean_ipc(user)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the host's to handle
    # `-m` put the working folder (the inbox) first on the path: nothing may be imported from there.
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    serve(socket.socket(fileno=int(sys.argv[1])), json.loads(sys.argv[2]) if len(sys.argv) > 2 else {},
          dict(os.environ))
    # Everything it started is dead and its folders are clean (serve's last step): an interpreter that
    # tore torch down object by object now would only keep the host waiting (a quarter of a second).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
