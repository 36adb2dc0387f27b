"""The zygote: a clean process that imports torch once, then forks one sandbox worker per request.

Runs on the untrusted side of the boundary but before any student code: it never imports the
reference, the checks or a submission. Forking from it costs milliseconds instead of the second
a fresh Python needs to import torch, so every target can have its own process.

Protocol on the control socket (SOCK_SEQPACKET, one JSON message per packet):
  {"op": "spawn", "workdir", "submission", "exercise", "limits"} + the worker's socket as SCM_RIGHTS
      -> {"pid": N}
  {"op": "reap", "pid": N} -> kills N's process group, waits -> {"exitcode": code}
      (negative: killed by that signal, as in subprocess)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def _reap_orphans() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(control: socket.socket) -> None:
    """Answer spawn and reap requests until the host closes the control socket."""
    from graders.sandbox import worker  # imports torch: the cost every worker then shares
    from graders.sandbox.warmup import warm_up

    warm_up()

    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 65536, 1)
        except OSError:
            return
        if not message:
            return
        request = json.loads(message)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                control.close()
                try:
                    worker.start(fds[0], request)
                finally:
                    os._exit(70)
            for fd in fds:
                os.close(fd)
            reply = {"pid": pid}
        elif request["op"] == "reap":
            pid = int(request["pid"])
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                _, status = os.waitpid(pid, 0)
                reply = {"exitcode": os.waitstatus_to_exitcode(status)}
            except ChildProcessError:
                reply = {"exitcode": None}
            _reap_orphans()
        else:
            reply = {"error": f"unknown op {request.get('op')!r}"}
        control.send(json.dumps(reply).encode())


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the host's to handle
    serve(socket.socket(fileno=int(sys.argv[1])))
