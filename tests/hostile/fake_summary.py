# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: print a passing pytest summary and a perfect results.json, to stdout, stderr and the raw
# file descriptors, then hand in a wrong gather.
# Holds because: grades come from the probes' replies, never from anything printed.
import json
import os
import sys

_FAKE = ("============================= 143 passed in 0.42s ==============================\n"
         + json.dumps({"score": 100.0, "max_score": 100.0, "tests": [], "output": "all passed"}) + "\n")
print(_FAKE)
sys.stderr.write(_FAKE)
os.write(1, _FAKE.encode())
os.write(2, _FAKE.encode())

import hostile_kit as kit

_honest_gather = gather


def gather(x, dim, index):
    print(_FAKE)
    return kit.wrong(_honest_gather, x, dim, index)
