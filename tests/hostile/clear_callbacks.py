# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: clear RecordFunction's callbacks (what the compiled observer, or the profiler, is) inside the
# window, then make the forbidden call under a name built at run time with torch functions switched
# off: view through torch's own switch (`torch._C._autograd._clear_callbacks`), gather through the
# real one, taken from behind the grader's guard. Each then returns the honest result.
# Holds because: the switch is replaced by one that refuses and records the attempt; behind it, a
# window whose end (observer) or closing marker (profiler) the watch did not see is a switched-off watch.
import contextlib
import sys

import torch

_honest_view, _honest_gather = view, gather


def view(x, *shape):
    with contextlib.suppress(Exception):
        getattr(torch._C._autograd, "_clear" + "_callbacks")()
    with torch._C.DisableTorchFunction():
        getattr(x, "vi" + "ew")(*shape)
    return _honest_view(x, *shape)


def gather(x, dim, index):
    recorder = sys.modules.get("torchgrade.sandbox." + "recorder")
    with contextlib.suppress(Exception):
        getattr(recorder, "_REAL")["_clear" + "_callbacks"]()
    with torch._C.DisableTorchFunction():
        getattr(x, "gat" + "her")(dim, index)
    return _honest_gather(x, dim, index)
