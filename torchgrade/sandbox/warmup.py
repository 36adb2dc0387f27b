"""Pay torch's lazy imports once in the zygote, so that no forked worker pays them again.

A first ``backward(gradient)`` imports sympy (via torch.fx), an optimizer imports torch._dynamo,
gradcheck, DataLoader and torch.distributed import more: 0.3 s to 2 s each time in a fresh fork,
i.e. per target. Importing them starts no threads (checked), so forking afterwards is safe.
Only imports happen here: no CUDA initialisation, no threads that a fork would lose. Not even a tiny
backward: on a machine with a GPU autograd's first backward starts its per-device threads and asks the
CUDA driver how many devices there are, after which no forked worker can use CUDA ("CUDA error:
initialization error") or autograd (seen on an H100; a worker's own first backward costs 2 ms).

The fork server, each zygote, each portable worker and the process that checks the course import
torch inside `importing()`: without the cyclic collector, then frozen. A sandbox process (a zygote,
a portable worker) does all of its preparation in `prepare`.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
from typing import Iterator

_MODULES = (
    "torch._dynamo",  # any optimizer or DDP wrapper imports it: about 2 s per worker otherwise
    "torch.optim",
    "torch.fx.experimental.symbolic_shapes",
    "torch.autograd.gradcheck",
    "torch.utils.data",
    "torch.distributed",
    "torch.nn.parallel",
    "numpy",
)


def warm_up() -> None:
    """Import what probes and typical student code trigger lazily (see the module's docstring for what not)."""
    for name in _MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


@contextlib.contextmanager
def importing() -> Iterator[None]:
    """Import torch and the rest without the cyclic collector, then freeze what was imported.

    Imports make hundreds of thousands of long-lived objects and next to no garbage, yet each
    allocation count past the threshold starts a collection that walks them all: about a fifth of
    the CPU of importing torch and warming up (0.5 to 0.7 s of 2.8 on the development machine).
    Frozen, they are never walked again, here or in any process forked from here.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def prepare(probes: str | None) -> str | None:
    """A sandbox process before any student code: torch and the worker imported, the course's trusted
    probes loaded, the warm-up done, the profiler's switches made the recorder's (see
    torchgrade.sandbox.recorder); all inside `importing()`. Returns why the probes did not load, if so."""
    with importing():
        from . import worker  # noqa: F401  (imports torch)
        from .probes import ProbeLoadError, load_course
        from .entries import entries
        from .arrays import watch_numpy_allocator, watch_numpy_arrays, watch_threads
        from .recorder import guard_kernel_entries, guard_switches

        try:
            load_course(probes)
        except ProbeLoadError as e:
            return str(e)[:2000]
        warm_up()
        entries()  # torch's entry points named once, for every worker forked from here
        guard_switches()
        guard_kernel_entries()
        watch_numpy_allocator()
        watch_numpy_arrays()
        watch_threads()
    return None
