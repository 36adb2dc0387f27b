# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: make_loader forks until the sandbox's process cap says no (at most 600), leaves the
# children sleeping, and answers wrongly. The same submission's other modules (parallel.py starts
# two ranks per check) need processes of the same sandbox user.
# Holds because: a worker that left processes behind is ended, with all it started, before another
# module's worker runs: one module's processes never count against the next module's.
import os
import time

import hostile_kit as kit


def make_loader(*args, **kwargs):
    for _ in range(600):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                kit.name_process()
                time.sleep(600)
            finally:
                os._exit(0)
    return None
