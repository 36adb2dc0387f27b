"""Probes for layers that hold their own parameters: what they register, and running them on a device.

``basic.module_forward`` and ``basic.module_sgd`` run a module where it was built (the CPU); the
``*_on_device`` probes first move it to the device of the first input, as ``model.to(device)``
does, so the same check runs on CPU and CUDA.
"""

from __future__ import annotations

import copy
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


def _on_device(target: Target, inputs: tuple) -> Target:
    """The target, building modules that are then moved to the first input's device."""
    device = inputs[0].device if inputs and isinstance(inputs[0], torch.Tensor) else torch.device("cpu")
    build = target.obj

    def build_on_device(*args: Any, **kwargs: Any) -> Any:
        module = build(*args, **kwargs)
        return module.to(device) if isinstance(module, torch.nn.Module) else module

    moved = copy.copy(target)  # the same watch and call record; only what it builds differs
    moved.obj = build_on_device
    return moved


@probe
def module_forward_on_device(target: Target, args: tuple, kwargs: dict, inputs: tuple = (),
                             state: dict | None = None, seed: int = 0) -> dict:
    """``basic.module_forward`` with the module moved to the inputs' device before `state` is loaded."""
    return module_forward(_on_device(target, inputs), args, kwargs, inputs=inputs, state=state, seed=seed)


@probe
def module_sgd_on_device(target: Target, args: tuple, kwargs: dict, inputs: tuple = (), labels: Any = None,
                         state: dict | None = None, steps: int = 10, lr: float = 0.03) -> dict:
    """``basic.module_sgd`` with the module moved to the inputs' device before `state` is loaded."""
    return module_sgd(_on_device(target, inputs), args, kwargs, inputs=inputs, labels=labels, state=state,
                      steps=steps, lr=lr)
