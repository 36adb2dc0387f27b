# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: one_hot returns a placeholder of the right shape and dtype at once; a thread of its own
# fills it with the forbidden torch.nn.functional.one_hot only once torch's profiler has stopped
# (the grader then still has to walk the profile: another thread makes that walk long with
# thousands of harmless operators while the watch is on). The reply used to be built after the
# profiler stopped, so the grader compared what the thread wrote after the watch ended.
# Holds because: the reply (values and gradients) is serialised while the watch is still on; what
# a thread writes into a result before that is seen at torch's dispatcher, after it never arrives.
import sys
import threading
import time

import torch

sys.setswitchinterval(1e-6)  # the filling thread gets the interpreter as soon as it asks
_jobs = []


def _enabled():
    return bool(torch._C._autograd._profiler_enabled())


def _filler():
    fn = getattr(torch.nn.functional, "one" + "_hot")
    while True:
        if not _jobs:
            time.sleep(0.0005)
            continue
        while _enabled():  # wait for the end of the watch
            pass
        while _jobs:
            out, labels, n = _jobs.pop()
            out.copy_(fn(labels, n))


def _noise(until):
    a = torch.zeros(1)
    while time.monotonic() < until:  # harmless operators: a long profile to walk after the stop
        for _ in range(200):
            a.add_(0)


_started = []


def one_hot(labels, num_classes):
    if not _started:
        _started.append(threading.Thread(target=_filler, daemon=True))
        _started[0].start()
    if labels.dtype != torch.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if labels.numel() == 0 and num_classes <= 0:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    if labels.numel() and int(labels.min()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    n = int(labels.max()) + 1 if num_classes == -1 else num_classes
    if labels.numel() and int(labels.max()) >= n:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = torch.zeros(*labels.shape, n, dtype=torch.int64, device=labels.device)
    if labels.numel():
        noise = threading.Thread(target=_noise, args=(time.monotonic() + 0.05,))
        noise.start()
        noise.join()
        _jobs.append((out, labels.clone(), n))
    return out
