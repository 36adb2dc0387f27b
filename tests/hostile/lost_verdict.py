

# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# --- attack: lose the watch's verdict with the worker, then answer the second run cleanly ---
# Where the profiler watches, a request's verdict waits until its worker's session is read. gather makes
# its forbidden call (and is right), then one_hot, a later request of another target, ends the worker
# before the session is read (its own request is run again alone, for free). A second run of gather's
# requests, in the same sandbox, finds the file the first one left in /tmp and answers without the
# forbidden call: were that run's record to stand for the first run's compared result, gather would keep
# its points.
import os as _os
import signal as _signal

import torch as _torch
from hostile_kit import NONCE as _NONCE
from torch.utils import _python_dispatch as _pd

_ARMED = f"/tmp/lost-verdict-armed-{_NONCE}"
_KILLED = f"/tmp/lost-verdict-killed-{_NONCE}"
_one_hot = one_hot


def gather(x, dim, index):
    if _os.path.exists(_KILLED):  # a second run: nothing forbidden, and no answer worth comparing
        return _torch.zeros(index.shape, dtype=x.dtype)
    open(_ARMED, "w").close()
    with getattr(_pd, "_disable_current" + "_modes")(), _torch._C.DisableTorchFunction():  # seen at the dispatcher only
        return getattr(_torch, "gat" + "her")(x, dim, index)


def one_hot(labels, num_classes):
    if _os.path.exists(_ARMED):
        _os.rename(_ARMED, _KILLED)
        _os.kill(_os.getpid(), _signal.SIGKILL)
    return _one_hot(labels, num_classes)
