# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: gather forks 100 processes that leave its session and sleep, then answers wrongly.
# Holds because: processes are capped (as root), and everything a worker started is killed with
# it: its process group, then every orphan re-parented to the zygote (a child subreaper).
import os
import time

import hostile_kit as kit

_honest_gather = gather


_bombed = []


def gather(x, dim, index):
    for _ in range(0 if _bombed else 100):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                os.setsid()
                kit.name_process()
                time.sleep(600)
            finally:
                os._exit(0)
    _bombed.append(True)
    return kit.wrong(_honest_gather, x, dim, index)
