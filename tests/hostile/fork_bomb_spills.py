# Attack file: appended to data.py of a copy of the reference (see tests/hostile/__init__.py).
# Attack: make_loader starts 8 shells that each start 80 sleeping processes (a copy of `sleep` named
# after the attack), until the sandbox's process cap says no, leaves them behind and answers
# wrongly. The same submission's other modules (parallel.py starts two ranks per check) need
# processes of the same sandbox user.
# Holds because: a worker that left processes behind is ended, with all it started, before another
# module's worker runs: one module's processes never count against the next module's.
import os
import shutil
import time

import hostile_kit as kit

_bombed = []


def make_loader(*args, **kwargs):
    if not _bombed:
        _bombed.append(True)
        sleeper = os.path.abspath(kit.MARK)
        shutil.copy(shutil.which("sleep"), sleeper)
        for _ in range(8):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                os.execv("/bin/sh", ["sh", "-c", f"for i in $(seq 80); do {sleeper} 600 & done; wait"])
        time.sleep(1)  # (they are at the cap by now)
