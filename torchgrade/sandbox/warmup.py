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
a portable worker) does all of its preparation in `prepare`. A zygote for a check of one module leaves
the costly part (`LATER`) until it is told that more is coming (zygote.py's "warm").
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import sys
from typing import Iterator

_MODULES = (
    "torch.optim",
    "torch.fx.experimental.symbolic_shapes",  # a first backward(gradient) imports it (via torch.fx): 0.2 s
    "torch.autograd.gradcheck",
    "torch.utils.data",
    "torch.distributed",
    "torch.nn.parallel",
    "numpy",
)
#: The costly part (0.5 s of the 2.1 s a student's first check of one target took on the development
#: machine), which a zygote imports only when told that more than one module will be graded (`later`):
#: a check of one module does not wait for it, and its worker imports it itself if it needs it.
LATER = (
    "torch._dynamo",  # any optimizer or DDP wrapper imports it: about 2 s per worker otherwise
)


def warm_up(later: bool = True) -> None:
    """Import what probes and typical student code trigger lazily (see the module's docstring for what not);
    `later`: the costly part too (else `seed_as_dynamo_will`, and `import_later` when it is wanted)."""
    for name in _MODULES + (LATER if later else ()):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def seed_as_dynamo_will() -> None:
    """Wrap ``torch.manual_seed`` as importing torch._dynamo does (torch/_dynamo/__init__.py): the one name
    of torch's public namespaces that the costly part changes. The table of entry points built before it
    is imported (``entries``) is then the one built after (tests/test_sandbox.py compares them)."""
    import torch

    if torch.manual_seed is torch.random.manual_seed and "torch._dynamo" not in sys.modules:
        import torch.jit._builtins

        torch.manual_seed = torch._disable_dynamo(torch.manual_seed)
        torch.jit._builtins._register_builtin(torch.manual_seed, "aten::manual_seed")


def import_later() -> None:
    """The costly part of the warm-up (`LATER`), imported as the rest was (`importing`)."""
    with importing():
        for name in LATER:
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


def prepare(probes: str | None, later: bool = True, observer: str | None = None) -> str | None:
    """A sandbox process before any student code: torch and the worker imported, the course's trusted
    probes loaded, the warm-up done (`later`: its costly part too), the compiled observer loaded from
    the host's `observer` path and proven (torchgrade.sandbox.observer), the watch's switches made the
    recorder's (see torchgrade.sandbox.recorder); all inside `importing()`. Returns why the probes did not
    load, if so."""
    with importing():
        from torchgrade.sandbox import worker  # noqa: F401  (imports torch)
        from torchgrade.sandbox.probes import ProbeLoadError, load_course
        from torchgrade.sandbox.entries import entries
        from torchgrade.sandbox.arrays import watch_numpy_allocator, watch_numpy_arrays, watch_threads
        from torchgrade.sandbox.recorder import guard_kernel_entries, guard_switches
        from torchgrade.sandbox import installed_state

        try:
            load_course(probes)
        except ProbeLoadError as e:
            return str(e)[:2000]
        warm_up(later)
        if not later:
            seed_as_dynamo_will()
        entries()  # torch's entry points named once, for every worker forked from here
        from torchgrade.sandbox import observer as compiled

        compiled.load(observer)
        guard_switches()
        guard_kernel_entries()
        watch_numpy_allocator()
        watch_numpy_arrays()
        watch_threads()
        installed_state.take()  # (last: what the warm-up set is installed code's own)
    return None
