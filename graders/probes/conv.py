"""Probes for layers that hold their own parameters: what they register, and running them on a device.

``basic.module_forward`` and ``basic.module_sgd`` move the module to the device of the first input, as
``model.to(device)`` does, so the same check runs on CPU and CUDA; the ``*_on_device`` names are theirs.
"""

from __future__ import annotations

from typing import Any

import torch

from torchgrade.probes import ProbeError, Target, probe
from torchgrade.sandbox.probes.basic import module_forward, module_sgd


@probe
def parameters(target: Target, args: tuple, kwargs: dict) -> dict:
    """Build the module; report each registered ``nn.Parameter``'s name, shape and dtype (no values)."""
    module = target(*args, **kwargs)
    if not isinstance(module, torch.nn.Module):
        raise ProbeError(f"{target.name}(...) built a {type(module).__name__}, expected a torch.nn.Module")
    return {"parameters": {name: {"shape": tuple(p.shape), "dtype": p.dtype}
                           for name, p in module.named_parameters()}}


@probe
def module_forward_on_device(target: Target, args: tuple, kwargs: dict, inputs: tuple = (),
                             state: dict | None = None, seed: int = 0) -> dict:
    """``basic.module_forward`` (which now moves the module to the inputs' device itself; kept for the checks
    that name it)."""
    return module_forward(target, args, kwargs, inputs=inputs, state=state, seed=seed)


@probe
def module_sgd_on_device(target: Target, args: tuple, kwargs: dict, inputs: tuple = (), labels: Any = None,
                         state: dict | None = None, steps: int = 10, lr: float = 0.03) -> dict:
    """``basic.module_sgd`` (which now moves the module to the inputs' device itself; kept for the checks that
    name it)."""
    return module_sgd(target, args, kwargs, inputs=inputs, labels=labels, state=state, steps=steps, lr=lr)
