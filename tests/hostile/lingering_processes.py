# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: at import, start a thread and a double-forked daemon (its parent exits, so it belongs to
# no process group of ours); gather starts another. They try to outlive the submission.
# Holds because: the zygote is a child subreaper: orphans come back to it and are killed, and
# under bubblewrap the pid namespace ends with the zygote.
import threading
import time

import hostile_kit as kit


def _busy():
    while True:
        time.sleep(0.05)


threading.Thread(target=_busy, daemon=True).start()
kit.daemon(lambda: time.sleep(600))

_honest_gather = gather


def gather(x, dim, index):
    kit.daemon(lambda: time.sleep(600))
    return kit.wrong(_honest_gather, x, dim, index)
