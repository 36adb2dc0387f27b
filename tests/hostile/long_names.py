# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: MyLayer registers 3000 parameters named with 2000 characters each. "unexpected ..." listed
# every name, and nothing cut a message: 6 MB per check, and a results.json, a report and a class
# junit.xml of tens of megabytes.
# Holds because: a message names at most a few items, each cut short, and every message is cut to
# a size (torchgrade/engine/bounds.py); every file the grader writes is bounded by the course's size.
import torch

_honest_layer = MyLayer


class MyLayer(_honest_layer):
    def __init__(self) -> None:
        super().__init__()
        for i in range(3000):
            self.register_parameter(f"{i:04d}" + "p" * 1996, torch.nn.Parameter(torch.zeros(1)))
