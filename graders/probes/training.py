"""Probes for training.py: seeding, one training step, evaluation and a whole fit, on models built here.

Models, losses and optimizers cannot cross the boundary, so a check names them (MODELS, LOSSES,
OPTIMIZERS) and sends the starting weights; the probe builds them, wraps the model in a Recorder
that notes the mode and whether autograd was on at every forward pass, and reports plain data.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from torchgrade.probes import ProbeError, Target, clip, probe

#: Model architectures a check may name; each is built from the shapes of the state it is sent.
MODELS: dict[str, Callable[[dict], nn.Module]] = {
    "linear": lambda s: nn.Linear(s["weight"].shape[1], s["weight"].shape[0]),
    "mlp": lambda s: nn.Sequential(nn.Linear(s["0.weight"].shape[1], s["0.weight"].shape[0]), nn.ReLU(),
                                   nn.Linear(s["2.weight"].shape[1], s["2.weight"].shape[0])),
}
LOSSES: dict[str, Callable[[], nn.Module]] = {"CrossEntropyLoss": nn.CrossEntropyLoss, "MSELoss": nn.MSELoss}
OPTIMIZERS: dict[str, type] = {"SGD": torch.optim.SGD, "Adam": torch.optim.Adam}


class Recorder(nn.Module):
    """Wraps a model; every forward pass notes ``(self.training, torch.is_grad_enabled())``."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net
        self.seen: list[tuple[bool, bool]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append((self.training, torch.is_grad_enabled()))
        return self.net(x)


def build_model(name: str, state: dict) -> Recorder:
    """The named model with exactly the weights in `state` (built on the meta device: no random init)."""
    first = next(iter(state.values()))
    with torch.device("meta"):
        net = MODELS[name](state).to(first.dtype)
    net.load_state_dict({k: v.clone() for k, v in state.items()}, assign=True)
    return Recorder(net)


def weights(model: Recorder) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def batches_of(data: tuple, batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Split (inputs, targets) into consecutive batches; the last one may be smaller."""
    inputs, targets = data
    return list(zip(inputs.split(batch_size), targets.split(batch_size)))


def loader_of(data: tuple, batch_size: int, kind: str, seed: int = 0) -> Any:
    """A loader over (inputs, targets): a plain list of batches, or a DataLoader (in order or shuffled)."""
    if kind == "list":
        return batches_of(data, batch_size)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(*data), batch_size=batch_size, shuffle=kind == "shuffled", generator=generator)


def number(value: Any, what: str) -> float:
    """A real number (int, float, or a one-element tensor) as a float; ProbeError for anything else."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        return float(value.detach().cpu())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ProbeError(f"{what} is a {type(value).__name__}, expected a number")


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Restore Python's, NumPy's and torch's global generators afterwards (the reference runs in the
    trusted process, whose generators a probe must leave as it found them)."""
    try:
        import numpy
    except ImportError:
        numpy = None
    state = random.getstate()
    numpy_state = numpy.random.get_state() if numpy is not None else None
    # Only generators already in use: reading a CUDA generator's state would initialise CUDA for nothing.
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(state)
            if numpy is not None:
                numpy.random.set_state(numpy_state)


def _draws(device: str) -> dict[str, Any]:
    try:
        import numpy
    except ImportError:
        numpy_draws: Any = "NumPy is not installed"
    else:
        numpy_draws = numpy.random.rand(3).tolist()
    return {"random": [random.random() for _ in range(3)], "numpy.random": numpy_draws,
            f"torch on {device}": torch.rand(3, device=device).cpu().tolist()}


@probe
def seeding(target: Target, args: tuple, kwargs: dict, device: str = "cpu", other: int | None = None) -> dict:
    """Call set_seed(*args) twice, drawing from every generator after each; report which repeated.

    With `other`, also call set_seed(other) and report which generators then drew different numbers.
    """
    with preserved_rng():
        target(*args, **kwargs)
        first = _draws(device)
        target(*args, **kwargs)
        second = _draws(device)
        facts = {f"{name} repeats after set_seed({args[0]})": first[name] == second[name] for name in first}
        if other is not None:
            target(other)
            third = _draws(device)
            facts.update({f"{name} draws other numbers after set_seed({other})":
                          isinstance(third[name], list) and third[name] != first[name] for name in first})
    return facts


def _modes(model: Recorder, grad: bool | None = None) -> list[bool]:
    """The distinct training flags seen at forward passes (those with autograd on/off, if `grad` is given)."""
    return sorted({training for training, enabled in model.seen if grad is None or enabled == grad})


def _keep(facts: dict, keep: tuple | None) -> dict:
    return facts if keep is None else {k: v for k, v in facts.items() if k in keep}


@probe
def training_steps(target: Target, args: tuple, kwargs: dict, state: dict | None = None, steps: int = 1,
                   stale: dict | None = None, keep: tuple | None = None) -> dict:
    """Call train_step(model, batch, loss_fn, optimizer) `steps` times; args name the model, loss and optimizer.

    args: (model name, batch, loss name, (optimizer name, optimizer options)). The model starts in
    eval mode (so train_step must switch it); with `stale`, those tensors are put on the parameters
    as .grad first, as an earlier step would leave them.
    """
    name, batch, loss_name, (optimizer_name, optimizer_options) = args
    model = build_model(name, state)
    model.eval()
    optimizer = OPTIMIZERS[optimizer_name](model.parameters(), **optimizer_options)
    for key, grad in (stale or {}).items():
        model.net.get_parameter(key).grad = grad.clone()
    before = weights(model)
    returned, after = [], []
    for _ in range(steps):
        returned.append(target(model, batch, LOSSES[loss_name](), optimizer))
        after.append(weights(model))
    facts = {
        "type of the returned loss": [type(r).__name__ for r in returned],
        "returned losses": [number(r, "the returned loss") for r in returned],
        "parameters changed by the first step": any(not torch.equal(before[k], after[0][k]) for k in before),
        "parameters after each step": after,
        "model.training during forward": _modes(model),
        "autograd on during forward": sorted({enabled for _, enabled in model.seen}),
    }
    return _keep(facts, keep)


@probe
def evaluation(target: Target, args: tuple, kwargs: dict, state: dict | None = None, batch_size: int = 4,
               loader: str = "list", keep: tuple | None = None) -> dict:
    """Call evaluate(model, loader): args are (model name, (inputs, targets)), read in batches of `batch_size`.

    The model starts in training mode (so evaluate must switch it). Reports the accuracy, and the
    training flags and autograd states seen at the forward passes.
    """
    name, data = args
    model = build_model(name, state)
    model.train()
    accuracy = target(model, loader_of(data, batch_size, loader))
    facts = {
        "accuracy": number(accuracy, "the accuracy"),
        "model.training during forward": _modes(model),
        "autograd on during forward": sorted({enabled for _, enabled in model.seen}),
    }
    return _keep(facts, keep)


@probe
def fitting(target: Target, args: tuple, kwargs: dict, state: dict | None = None, batch_size: int = 8,
            loader: str = "list", seed: int = 0, threshold: float | None = None,
            keep: tuple | None = None) -> dict:
    """Call fit(model, train_loader, val_loader, epochs, lr): args are (model name, (inputs, targets) for
    training, (inputs, targets) for validation, epochs, lr), read in batches of `batch_size`.

    Reports the history (numbers as floats, only the three keys of the contract), whether every forward
    pass with autograd on was in training mode and every one without it in eval mode, and, with
    `threshold`, whether the last epoch's validation accuracy reached it.
    """
    name, train, val, epochs, lr = args
    model = build_model(name, state)
    with preserved_rng():
        history = target(model, loader_of(train, batch_size, loader, seed), loader_of(val, batch_size, "list"),
                         epochs, lr)
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        raise ProbeError(f"fit returned a {type(history).__name__}, expected a list with one dict per epoch")
    records = []
    for i, entry in enumerate(history):
        record: dict[str, Any] = {}
        if "epoch" in entry:
            record["epoch"] = entry["epoch"] if type(entry["epoch"]) is int else clip(repr(entry["epoch"]), 40)
        for key in ("train_loss", "val_accuracy"):
            if key in entry:
                record[key] = number(entry[key], f"history[{i}][{key!r}]")
        records.append(record)
    facts: dict[str, Any] = {"history": records}
    if threshold is not None:
        final = records[-1].get("val_accuracy", float("nan")) if records else float("nan")
        facts["val_accuracy after the last epoch"] = (
            f"at least {threshold:g}" if final >= threshold else f"{final:.3f} (below {threshold:g})")
    facts["every forward pass with autograd on ran in training mode"] = _modes(model, grad=True) in ([], [True])
    facts["every forward pass without autograd ran in eval mode"] = _modes(model, grad=False) in ([], [False])
    return _keep(facts, keep)
