"""Probes for modules.py: what a module registers and computes, what init_weights leaves, counting.

Models that a check hands to ``init_weights`` or ``count_parameters`` are built here from the
public tables ``INIT_MODELS`` and ``COUNT_MODELS`` (a model cannot cross the process boundary);
the check names one by its key.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from torchgrade.probes import ProbeError, Raised, Target, probe, raised, tensor, grad_seed


def _build(target: Target, args: tuple, kwargs: dict) -> nn.Module:
    module = target(*args, **kwargs)
    if not isinstance(module, nn.Module):
        raise ProbeError(f"{target.name}(...) built a {type(module).__name__}, expected a torch.nn.Module")
    return module


def _shape(p: torch.Tensor) -> str:
    """A parameter's shape as text; a lazy module's parameter has none until its first forward."""
    if isinstance(p, nn.parameter.UninitializedParameter):
        return "uninitialized (a lazy module's parameter: no shape before the first forward)"
    return str(tuple(p.shape))


@probe
def module_facts(target: Target, args: tuple, kwargs: dict, inputs: tuple = (), forward_kwargs: dict | None = None,
                 state: dict | None = None, seed: int = 0) -> dict:
    """Build the module; report its submodules (in order) and parameters (names, shapes); move it
    to the dtype and device of ``inputs[0]``, load `state`, run forward and backpropagate a fixed
    gradient: report the output and the gradients of the input and of every parameter."""
    module = _build(target, args, kwargs)
    facts: dict[str, Any] = {
        "submodules": [f"{name}: {type(m).__name__}" for name, m in module.named_children()],
        "parameters": {name: _shape(p) for name, p in module.named_parameters()},
    }
    x = inputs[0].detach().requires_grad_(True)
    try:
        target.drive(module.to, device=x.device, dtype=x.dtype)
        if state is not None:
            target.drive(module.load_state_dict, state)
        raw = target.run(module, x, *inputs[1:], **(forward_kwargs or {}))
        out = tensor(raw, "forward's result")
        if raw.requires_grad:
            target.drive(torch.autograd.backward, raw, grad_seed(out, seed))
    except Raised as e:
        return {**facts, "value": raised(e.error), "input_grad": None, "grads": None}
    return {**facts, "value": out.clone(), "input_grad": None if x.grad is None else x.grad.detach(),
            "grads": {name: None if p.grad is None else p.grad.detach() for name, p in module.named_parameters()}}


class ScaledLinear(nn.Linear):
    """A subclass of nn.Linear (init_weights must treat it as a Linear)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * super().forward(x)


#: Models for init_weights, by name. Layers hold about 1e5 weights each, so that the spread of the
#: weights is measured to well under a percent, and fan_in differs from fan_out everywhere.
INIT_MODELS: dict[str, Callable[[], nn.Module]] = {
    "Linear(250, 400)": lambda: nn.Linear(250, 400),
    "nested: Linear, ReLU, [Conv2d 3x5, BatchNorm2d], Conv1d": lambda: nn.Sequential(
        nn.Linear(250, 400), nn.ReLU(),
        nn.Sequential(nn.Conv2d(64, 128, (3, 5)), nn.BatchNorm2d(128)),
        nn.Conv1d(4, 8, 3)),
    "bias-free Linear and Conv2d": lambda: nn.Sequential(
        nn.Linear(250, 400, bias=False), nn.Conv2d(64, 128, (3, 5), bias=False)),
    "Linear subclass, LayerNorm, Embedding": lambda: nn.Sequential(
        nn.Embedding(50, 250), ScaledLinear(250, 400), nn.LayerNorm(400)),
    "Conv2d(128, 256, (3, 5), groups=4)": lambda: nn.Conv2d(128, 256, (3, 5), groups=4),
}
#: The value every parameter and buffer holds before init_weights runs (integer buffers: 3).
FILL = 0.5


def _layers(net: nn.Module) -> dict[str, nn.Module]:
    """The Linear and Conv2d layers (subclasses included) of a model, by name."""
    return {name or "the model itself": m for name, m in net.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))}


@probe
def init_weights_report(target: Target, args: tuple, kwargs: dict, part: str = "structure", seed: int = 0,
                        device: str = "cpu") -> dict:
    """Fill every value of ``INIT_MODELS[args[0]]`` with FILL, run ``init_weights`` on it (seeded), report `part`:

    ``structure``: per Linear/Conv2d layer, whether its weight was initialised (no longer FILL) in
    place and its bias is zero; for every other module, whether its parameters and buffers still hold FILL.
    ``spread``: per layer, the standard deviation and the kurtosis of its weights.
    ``centre``: per layer, the mean of its weights in units of their standard deviation.
    """
    if args[0] not in INIT_MODELS:
        raise ValueError(f"unknown model {args[0]!r}")
    # (CUDA's generator only where there is CUDA: on the CUDA stand-in, "cuda" tensors draw from the CPU's)
    cuda = [torch.device(device).index or 0] if torch.device(device).type == "cuda" and torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):  # the grader's own random state is left as it was
        net = INIT_MODELS[args[0]]().to(device)
        with torch.no_grad():
            for t in [*net.parameters(), *net.buffers()]:
                t.fill_(FILL if t.is_floating_point() else 3)
        before = {name: (m.weight, m.weight.data_ptr()) for name, m in _layers(net).items()}
        torch.manual_seed(seed)
        target(net, *args[1:], **kwargs)
    layers = _layers(net)
    if part == "structure":
        others = {}
        for name, m in net.named_modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                continue
            for tname, t in [*m.named_parameters(recurse=False), *m.named_buffers(recurse=False)]:
                fill = FILL if t.is_floating_point() else 3
                others[f"{name}.{tname}" if name else tname] = bool((t == fill).all())
        return {
            "weight_initialised": {name: not bool((m.weight == FILL).all()) for name, m in layers.items()},
            "bias_zero": {name: None if m.bias is None else bool((m.bias == 0).all()) for name, m in layers.items()},
            "weight_in_place": {name: name in before and m.weight is before[name][0]
                                and m.weight.data_ptr() == before[name][1] for name, m in layers.items()},
            "others_unchanged": others,
        }
    weights = {name: m.weight.detach().to(torch.float64).flatten() for name, m in layers.items()}
    if part == "spread":
        return {"weight_std": {name: float(w.std()) for name, w in weights.items()},
                "weight_kurtosis": {name: float((((w - w.mean()) / w.std()) ** 4).mean())
                                    for name, w in weights.items()}}
    if part == "centre":
        return {"weight_mean_over_std": {name: float(w.mean() / w.std()) for name, w in weights.items()}}
    raise ValueError(f"unknown part {part!r}")


def _tied() -> nn.Module:
    net = nn.Module()
    net.embed = nn.Embedding(100, 16)
    net.project = nn.Linear(16, 100, bias=False)
    net.project.weight = net.embed.weight
    return net


def _frozen(net: nn.Module, *names: str) -> nn.Module:
    for name, p in net.named_parameters():
        if name.startswith(names):
            p.requires_grad_(False)
    return net


#: Models for count_parameters, by name.
COUNT_MODELS: dict[str, Callable[[], nn.Module]] = {
    "MLP(784, 256, 10)": lambda: nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)),
    "MLP(784, 256, 10) with the first layer frozen": lambda: _frozen(
        nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)), "0."),
    "Linear(10, 5) with only its bias frozen": lambda: _frozen(nn.Linear(10, 5), "bias"),
    "Embedding(100, 16) tied to Linear(16, 100)": _tied,
    "Conv2d(3, 8, 3) and BatchNorm2d(8) (with buffers)": lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)),
    "ReLU() (no parameters)": nn.ReLU,
}


@probe
def count_parameters_of(target: Target, args: tuple, kwargs: dict) -> Any:
    """``count_parameters(COUNT_MODELS[args[0]], *args[1:], **kwargs)``."""
    if args[0] not in COUNT_MODELS:
        raise ValueError(f"unknown model {args[0]!r}")
    return target(COUNT_MODELS[args[0]](), *args[1:], **kwargs)

