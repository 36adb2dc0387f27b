# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: gather sets a trap in its worker process that ends the process as soon as it runs another
# target of tensors.py (broadcast_shape): the targets of a module share a process.
# Holds because: a failure in a worker that already ran another target is run again in a worker of
# its own, where only that target's own code runs; gather's own checks fail on its wrong values.
import os
import sys

import hostile_kit as kit

_honest_gather = gather


def _trap(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "broadcast_shape":
        os._exit(0)


def gather(x, dim, index):
    sys.setprofile(_trap)  # stays after gather returns, for every call this thread makes
    return kit.wrong(_honest_gather, x, dim, index)
