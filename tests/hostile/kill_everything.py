# Attack: gather kills every process it can see, its parents and the grader first.
# Holds from: unprivileged-user (processes of other users, the zygote and the grader, cannot be
# signalled; under bubblewrap they are not even visible). As the grader's own user it would win.
import os
import signal

import hostile_kit as kit


def gather(x, dim, index):
    for pid in kit.ancestors() + sorted(kit.pids(), reverse=True):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
