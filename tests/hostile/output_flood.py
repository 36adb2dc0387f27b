# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: gather prints 500 MB (and writes more straight to the file descriptor), then answers wrongly.
# Holds because: printed output is cut at a byte budget in the worker (and files at a size limit):
# neither the grader's memory nor its disk fills, and the report keeps only the last few KB.
import os

import hostile_kit as kit

_honest_gather = gather
_LINE = "flood " * 170_000 + "\n"  # about 1 MB


def gather(x, dim, index):
    for _ in range(500):
        print(_LINE, end="")
    try:
        for _ in range(100):
            os.write(1, _LINE.encode())
    except OSError:
        pass
    return kit.wrong(_honest_gather, x, dim, index)
