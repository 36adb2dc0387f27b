"""Probes for autograd.py: functions named in a public table, the caller's tensors before and after, SGD.

Functions cannot cross the process boundary, so a check names one (``"cumsum_sin"``) and the probe
looks it up in ``FUNCTIONS``. Besides the result, every probe reports what the call left on the
caller's tensors (values, ``requires_grad``, ``.grad``): the contract says they stay as they were.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch

from torchgrade.probes import ProbeError, Target, probe, tensor, grad_seed


def _fixed_matrix(rows: int, like: torch.Tensor) -> torch.Tensor:
    """A fixed pseudo-random (rows, like.numel()) matrix: a rectangular, non-diagonal Jacobian."""
    g = torch.Generator().manual_seed(1234)
    return torch.randn(rows, like.numel(), generator=g, dtype=torch.float64).to(like.dtype).to(like.device)


#: A parameter some functions close over (it requires grad: their output does too, whether or not it
#: depends on x). A backward that reaches it accumulates into its .grad, which nothing reads.
_PARAMETER = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)


def _parameter(like: torch.Tensor) -> torch.Tensor:
    return _PARAMETER.to(device=like.device, dtype=like.dtype)


#: The functions a check may name. Several are non-diagonal or rectangular on purpose: a Jacobian
#: that collapses rows, accumulates them or transposes them shows only on such functions.
FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "notes_quadratic": lambda t: 3 * (t + 2) ** 2,
    "notes_three_quarter_square": lambda t: 0.75 * (t + 2) ** 2,
    "notes_cat": lambda w: torch.cat([(w + 2) * (w + 1), (w + 2) + (w + 1)]),
    "square": lambda t: t ** 2,
    "cube": lambda t: t ** 3,
    "sin": torch.sin,
    "tanh": torch.tanh,
    "softplus": torch.nn.functional.softplus,
    "x_exp_x": lambda t: t * torch.exp(t),
    "linear": lambda t: 3 * t + 1,
    "constant": lambda t: torch.ones(3, dtype=t.dtype, device=t.device),
    "cumsum_sin": lambda t: torch.sin(t).cumsum(0),
    "matmul_fixed": lambda t: _fixed_matrix(3, t) @ t.reshape(-1),
    "row_sums": lambda t: t.sum(dim=1),
    "outer_sin": lambda t: torch.outer(t, torch.sin(t)),
    "sum_of_squares": lambda t: (t ** 2).sum(),
    "relu": torch.relu,
    "no_outputs": lambda t: 2 * t.reshape(-1)[:0],
    # closing over a parameter: the output requires grad through it alone, or is linear in x through it
    "parameter_only": lambda t: _parameter(t) * torch.ones_like(t),
    "times_a_parameter": lambda t: t * _parameter(t),
}


@contextlib.contextmanager
def uninitialised_memory_shows() -> Iterator[None]:
    """While the target runs, torch.empty* fill new memory with NaN (integers: their largest value), as
    PyTorch does in deterministic mode: a result left uninitialised (``empty_like`` where ``zeros_like``
    was meant) then shows every time instead of passing when the allocator happens to hand out zeros."""
    state = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    # (the switch itself: torch.use_deterministic_algorithms also sets the compiler's flag, importing
    # torch._inductor and torch._dynamo for it, 1.3 s in a process that had not; nothing here compiles)
    switch = getattr(torch._C, "_set_deterministic_algorithms", None) or torch.use_deterministic_algorithms
    switch(True, warn_only=True)
    try:
        yield
    finally:
        switch(state[0], warn_only=state[1])


def _caller_tensors(args: list, watched: tuple[int, ...], caller: str, seed: int) -> dict[int, torch.Tensor]:
    """Prepare the watched arguments as the caller's tensors; return the leaves whose .grad to watch.

    ``plain``: as sent (no grad). ``leaf_with_grad``: leaves that require grad and already hold a
    ``.grad``. ``non_leaf``: results of another graph (``leaf * 1``), whose leaf must get no grad.
    ``inference``: made under ``torch.inference_mode()`` (valid float tensors; their detached alias
    refuses ``requires_grad_``, a copy does not).
    """
    leaves = {}
    for i in watched:
        x = args[i]
        if caller == "plain":
            leaves[i] = x
        elif caller == "leaf_with_grad":
            args[i] = leaves[i] = x.detach().requires_grad_(True)
            args[i].grad = grad_seed(x, seed + 100 + i)
        elif caller == "inference":
            with torch.inference_mode():
                args[i] = leaves[i] = x.clone()
        elif caller == "non_leaf":
            leaves[i] = x.detach().requires_grad_(True)
            args[i] = leaves[i] * 1
        else:
            raise ValueError(f"unknown caller state {caller!r}")
    return leaves


@probe
def autograd_call(target: Target, args: tuple, kwargs: dict, fn: bool = True, watched: tuple = ((1, "x"),),
                  caller: str = "plain", seed: int = 0, history: bool = False) -> dict:
    """Call the target (with ``FUNCTIONS[args[0]]`` in place of the name when `fn`); report the result
    and, for each watched ``(position, name)`` argument, what the call left on the caller's tensor; with
    `history`, only whether the result requires grad or has a grad_fn (the check about that alone)."""
    args = list(args)
    if fn:
        if args[0] not in FUNCTIONS:
            raise ValueError(f"unknown function {args[0]!r}")
        args[0] = FUNCTIONS[args[0]]
    positions = tuple(i for i, _ in watched)
    leaves = _caller_tensors(args, positions, caller, seed)
    before = {i: args[i].detach().clone() for i in positions}
    with uninitialised_memory_shows():
        raw = target(*args, **kwargs)
    facts: dict[str, Any] = {"caller_requires_grad_after": {}, "caller_grad_after": {}, "caller_values_kept": {}}
    for i, name in watched:
        x, grad = args[i], leaves[i].grad
        facts["caller_requires_grad_after"][name] = x.requires_grad
        facts["caller_grad_after"][name] = None if grad is None else grad.detach().clone()
        facts["caller_values_kept"][name] = bool(torch.equal(x.detach(), before[i]))
    value = tensor(raw, f"{target.name}'s result")
    if history:
        return {"result_requires_grad": raw.requires_grad, "result_has_grad_fn": raw.grad_fn is not None}
    facts["value"] = value
    return facts


def _sgd_model(device: str, unused: bool) -> torch.nn.Module:
    """A small model with fixed values; with `unused`, plus a parameter that the loss does not use (its
    .grad stays None). Only the check about such parameters has one, so that an update that trips over
    it loses that check alone."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    if unused:
        model.register_parameter("unused", torch.nn.Parameter(torch.zeros(2)))
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return model.to(device)


#: How the parameters are handed to sgd_step_ (the check passes one of these names).
PARAMS_FORMS = ("model.parameters()", "list(model.parameters())", "a list naming one parameter twice")


@probe
def autograd_sgd_step(target: Target, args: tuple, kwargs: dict, device: str = "cpu", seed: int = 0,
                      unused: bool = False) -> dict:
    """Backpropagate a loss through a small model, call ``sgd_step_(params, lr)``, report each parameter.

    ``args`` is ``(form, lr)`` with ``form`` one of ``PARAMS_FORMS``; `unused` adds a parameter without a gradient.
    """
    form, lr = args
    model = _sgd_model(device, unused)
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randn(5, 4, generator=g).to(device)
    labels = torch.randn(5, 2, generator=g).to(device)
    ((model(inputs) - labels) ** 2).mean().backward()
    named = dict(model.named_parameters())
    storage = {name: p.data_ptr() for name, p in named.items()}
    if form == PARAMS_FORMS[0]:
        params: Any = model.parameters()
    elif form == PARAMS_FORMS[1]:
        params = list(model.parameters())
    elif form == PARAMS_FORMS[2]:
        params = [named["0.weight"], named["2.bias"], named["0.weight"]] + ([named["unused"]] if unused else [])
    else:
        raise ProbeError(f"unknown parameter form {form!r}")
    with torch.enable_grad():
        target(params, lr, **kwargs)
    return {
        "parameters_after": {name: p.detach().clone() for name, p in named.items()},
        "updated_in_place": {name: p.data_ptr() == storage[name] for name, p in named.items()},
        "still_leaf": {name: bool(p.is_leaf and p.requires_grad and p.grad_fn is None) for name, p in named.items()},
        "grads_cleared": {name: p.grad is None or bool((p.grad == 0).all()) for name, p in named.items()},
    }
