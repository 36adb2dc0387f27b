# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: a check of one module (`torchgrade check tensors.broadcast_to`) starts its workers from a
# sandbox that has not imported torch._dynamo (0.5 s of a first check: warmup.LATER). broadcast_to
# imports it itself, hoping that a module imported after the grader replaced the profiler's switches
# holds a real one; it switches RecordFunction off with it, expands under a name built at run time
# with torch functions switched off, and returns the honest result.
# Holds because: the switches are replaced where torch defines them (torch._C._autograd), so a module
# imported later finds only the grader's, which refuse and record; the expand is seen either way.
import contextlib
import importlib
import sys

import torch

_honest_broadcast_to = broadcast_to


def _real_switch():
    for module in list(sys.modules.values()):
        for value in list(getattr(module, "__dict__", {}).values()):
            with contextlib.suppress(Exception):  # (lazy objects that raise when looked at)
                if type(value).__name__ == "builtin_function_or_method" \
                        and value.__name__ == "_enable_record_function":
                    return value
    return None


def broadcast_to(x, shape):
    with contextlib.suppress(Exception):
        importlib.import_module("torch._dynamo")
    switch = _real_switch()
    if switch is not None:
        switch(False)
    with torch._C.DisableTorchFunction():
        getattr(x, "exp" + "and")(shape)
    if switch is not None:
        switch(True)
    return _honest_broadcast_to(x, shape)
