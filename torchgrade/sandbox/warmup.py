"""Pay torch's lazy imports once in the zygote, so that no forked worker pays them again.

A first ``backward(gradient)`` imports sympy (via torch.fx), an optimizer imports torch._dynamo,
gradcheck, DataLoader and torch.distributed import more: 0.3 s to 2 s each time in a fresh fork,
i.e. per target. Importing them starts no threads (checked), so forking afterwards is safe.
Only imports and CPU work happen here: no CUDA initialisation, no threads that a fork would lose.
"""

from __future__ import annotations

import contextlib
import importlib

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
    """Import what probes and typical student code trigger lazily, and run one tiny backward."""
    import torch

    for name in _MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    (x * 2).backward(torch.ones(2, dtype=torch.float64))
