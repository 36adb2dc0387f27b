# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: patch the builtins a naive grader judges with (all, any, abs, round, sum, and print to
# hide failures), then hand in a wrong gather.
# Holds because: builtins are per process; the trusted process, where the verdicts are made,
# never runs the submission's code.
import builtins

builtins.all = lambda iterable: True
builtins.any = lambda iterable: False
builtins.abs = lambda value: 0
builtins.round = lambda value, *digits: 0
builtins.sum = lambda iterable, start=0: 0
builtins.print = lambda *args, **kwargs: None

import hostile_kit as kit

_honest_gather = gather


def gather(x, dim, index):
    return kit.wrong(_honest_gather, x, dim, index)
