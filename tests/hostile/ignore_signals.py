# Attack: one_hot ignores every catchable signal (SIGTERM, SIGALRM, SIGINT, SIGHUP, SIGXCPU...),
# starts a child that does the same, and spins.
# Holds because: the worker and its process group are killed with SIGKILL, which cannot be ignored.
import os
import signal

import hostile_kit as kit


def one_hot(labels, num_classes):
    for sig in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGXCPU, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    signal.alarm(1)
    if os.fork() == 0:
        kit.name_process()
    while True:
        pass
