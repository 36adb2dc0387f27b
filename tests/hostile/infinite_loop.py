# Attack: one_hot never returns.
# Holds because: the host waits at most the check's time limit, then kills the worker's process group.


def one_hot(labels, num_classes):
    while True:
        pass
