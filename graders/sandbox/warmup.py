"""Pay torch's lazy imports once in the zygote, so that no forked worker pays them again.

A first ``backward(gradient)`` imports sympy (via torch.fx), gradcheck, DataLoader and
torch.distributed import more modules: about 0.3 s each time in a fresh fork, i.e. per target.
Only imports and CPU work happen here: no CUDA initialisation, no threads that a fork would lose.
"""

from __future__ import annotations

import contextlib
import importlib

_MODULES = (
    "torch.fx.experimental.symbolic_shapes",
    "torch.autograd.gradcheck",
    "torch.utils.data",
    "torch.distributed",
    "torch.nn.parallel",
    "numpy",
)


def warm_up() -> None:
    """Import what probes and typical student code trigger lazily, and run one tiny backward."""
    import torch

    for name in _MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    (x * 2).backward(torch.ones(2, dtype=torch.float64))
