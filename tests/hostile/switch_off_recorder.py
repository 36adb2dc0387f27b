# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: switch off what records calls at torch's dispatcher, then make the forbidden call under a
# name built at run time with torch functions switched off: broadcast_to turns RecordFunction off
# (`torch._C._autograd._enable_record_function(False)`), scatter_ pauses the profiler's collection
# (`_toggle_collection_dynamic`), one_hot stops the profiler (`torch.autograd._disable_profiler`).
# Each then returns the honest result.
# Holds because: those switches are replaced before any student code runs by ones that refuse and
# record the attempt, and a target with forbidden calls that switched the recorder off scores zero.
import contextlib

import torch
from torch.autograd import ProfilerActivity

_honest_broadcast_to, _honest_scatter_, _honest_one_hot = broadcast_to, scatter_, one_hot
_A = torch._C._autograd


def _quietly(fn, *args):
    with contextlib.suppress(Exception):
        return fn(*args)


def broadcast_to(x, shape):
    _quietly(getattr(_A, "_enable_record" + "_function"), False)
    with torch._C.DisableTorchFunction():
        _quietly(getattr(x, "exp" + "and"), shape)
    _quietly(getattr(_A, "_enable_record" + "_function"), True)
    return _honest_broadcast_to(x, shape)


def scatter_(target, dim, index, src):
    _quietly(getattr(_A, "_toggle_collection" + "_dynamic"), False, {ProfilerActivity.CPU})
    with torch._C.DisableTorchFunction():
        _quietly(getattr(target.clone(), "scat" + "ter_"), dim, index, src)
    _quietly(getattr(_A, "_toggle_collection" + "_dynamic"), True, {ProfilerActivity.CPU})
    return _honest_scatter_(target, dim, index, src)


def one_hot(labels, num_classes):
    _quietly(getattr(torch.autograd, "_disable" + "_profiler"))
    with torch._C.DisableTorchFunction():
        _quietly(getattr(torch.nn.functional, "one" + "_hot"), labels, num_classes)
    return _honest_one_hot(labels, num_classes)
