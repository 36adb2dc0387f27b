"""General probes: call, call with gradients, views and storage, in-place operations, modules."""

from __future__ import annotations

from typing import Any

import torch

from torchgrade.sandbox.probes.core import ProbeError, Raised, Target, probe, raised, tensor


def grad_seed(out: torch.Tensor, seed: int) -> torch.Tensor:
    """A fixed pseudo-random upstream gradient for `out`, the same on both sides of the boundary."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(out.shape, generator=g, dtype=torch.float64).to(dtype=out.dtype, device=out.device)


@probe
def call(target: Target, args: tuple, kwargs: dict) -> Any:
    """Call the target and return its result."""
    return target(*args, **kwargs)


@probe
def call_with_grad(target: Target, args: tuple, kwargs: dict, wrt: tuple = (0,), seed: int = 0) -> dict:
    """Call with the arguments at positions `wrt` requiring grad; backpropagate a fixed upstream gradient.

    Returns the output and the gradient that reached each of those arguments.
    """
    args = list(args)
    for i in wrt:
        args[i] = args[i].detach().requires_grad_(True)
    raw = target(*args, **kwargs)
    out = tensor(raw)
    if not raw.requires_grad:
        raise ProbeError(
            "the result is not differentiable: no gradient can reach the inputs (was it built with "
            ".detach(), .item(), torch.tensor(...), numpy, or written into a new tensor under no_grad?)"
        )
    target.drive(raw.backward, grad_seed(raw, seed))
    return {"value": out, "grads": [args[i].grad for i in wrt]}


@probe
def view(target: Target, args: tuple, kwargs: dict, write: bool = True) -> dict:
    """Call a view-making target; report shape, strides, offset, storage sharing and write-through."""
    x = args[0]
    out = target(*args, **kwargs)
    if not isinstance(out, torch.Tensor):
        raise ProbeError(f"the result is a {type(out).__name__}, expected a torch.Tensor")
    out = tensor(out)
    facts = {
        "value": out.clone(),
        "shape": tuple(out.shape),
        "stride": tuple(out.stride()),
        "storage_offset": out.storage_offset(),
        "shares_storage_with_input": out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(),
    }
    # Writing through a view where several elements share memory (stride 0) is undefined: skip it.
    overlapping = any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape))
    if write and out.numel() > 0 and not overlapping:
        with torch.no_grad():
            out.copy_(torch.arange(1, out.numel() + 1, device=out.device).reshape(out.shape).to(out.dtype))
        facts["input_after_writing_through_result"] = x.clone()
    return facts


@probe
def inplace(target: Target, args: tuple, kwargs: dict) -> dict:
    """Call an in-place target on args[0]; report whether it returned args[0] itself and what it holds."""
    destination = args[0]
    before = destination.untyped_storage().data_ptr()
    try:
        out = target(*args, **kwargs)
    except Raised as e:
        return {"raised": raised(e.error), "target_after": destination}
    return {
        "returned_the_target_itself": out is destination,
        "target_storage_unchanged": destination.untyped_storage().data_ptr() == before,
        "target_after": destination,
    }


def _first_device(inputs: Any) -> torch.device | None:
    """The device of the first tensor among the inputs (lists, tuples and dicts searched), or None."""
    if isinstance(inputs, torch.Tensor):
        return inputs.device
    items = inputs.values() if isinstance(inputs, dict) else inputs if isinstance(inputs, (list, tuple)) else ()
    return next((d for d in map(_first_device, items) if d is not None), None)


def _module(target: Target, args: tuple, kwargs: dict, state: dict | None, inputs: tuple = ()) -> torch.nn.Module:
    """Build the module, move it to the inputs' device (as ``model.to(device)`` does: a check then runs
    alike on every device), and load `state`."""
    module = target(*args, **kwargs)
    if not isinstance(module, torch.nn.Module):
        raise ProbeError(f"{target.name}(...) built a {type(module).__name__}, expected a torch.nn.Module")
    device = _first_device(inputs)
    if device is not None and device.type != "cpu":
        module = target.drive(module.to, device)
        if not isinstance(module, torch.nn.Module):
            raise ProbeError(f"{target.name}(...).to({str(device)!r}) returned a {type(module).__name__}, "
                             f"expected the module")
    if state is not None:
        target.drive(module.load_state_dict, state)
    return module


def _parameter_shapes(module: torch.nn.Module) -> dict:
    return {name: tuple(p.shape) for name, p in module.named_parameters()}


def outputs(raw: Any, what: str = "the result") -> list[torch.Tensor]:
    """A result that is a tensor, or a tuple or list of tensors, as a list of tensors (ProbeError otherwise)."""
    items = list(raw) if isinstance(raw, (tuple, list)) else [raw]
    if not items:
        raise ProbeError(f"{what} is an empty {type(raw).__name__}, expected tensors")
    for i, item in enumerate(items):  # (checked only: the tensors themselves keep their graph, for backward)
        tensor(item, f"{what}[{i}]" if isinstance(raw, (tuple, list)) else what)
    return items


def gradient(g: torch.Tensor | None) -> torch.Tensor | None:
    """A gradient as a probe reports it: an all-zero gradient as None (docs/authoring.md, "Fairness rules": where
    the reference's gradient is all zeros, a correct implementation that never lets one reach the tensor
    is equally right, and the reverse)."""
    if g is None:
        return None
    g = tensor(g, "a gradient")
    return None if not bool((g != 0).any()) else g


def backward(target: Target, raw: list[torch.Tensor], seed: int, wrt: list[torch.Tensor]) -> list:
    """Backpropagate a fixed upstream gradient (seed, seed + 1, ... per output) from the outputs that require
    grad; the gradients that reach `wrt`, each as `gradient` reports it."""
    differentiable = [r for r in raw if r.requires_grad]
    reached = [w for w in wrt if w.requires_grad]  # (a frozen parameter gets none)
    if not differentiable or not reached:
        return [None] * len(wrt)
    seeds = [grad_seed(r, seed + i) for i, r in enumerate(raw) if r.requires_grad]
    grads = iter(target.drive(torch.autograd.grad, differentiable, reached, seeds, allow_unused=True))
    return [gradient(next(grads)) if w.requires_grad else None for w in wrt]


@probe
def module_forward(target: Target, args: tuple, kwargs: dict, inputs: tuple = (), state: dict | None = None,
                   seed: int = 0) -> dict:
    """Build the module, move it to the inputs' device, load `state`, run forward on `inputs`, backpropagate
    a fixed gradient (one per output, where the forward returns a tuple or list of tensors).

    Returns the registered parameter names and shapes, the output (a list where it is a tuple or list)
    and each parameter's gradient, an all-zero gradient as None: a parameter that gets no gradient where
    the reference's is all zeros is equally right (docs/authoring.md, "Fairness rules").
    """
    module = _module(target, args, kwargs, state, inputs)
    raw = target.run(module, *inputs)
    outs = outputs(raw)
    value = [tensor(o) for o in outs] if isinstance(raw, (tuple, list)) else tensor(raw)
    grads = {}
    if any(o.requires_grad for o in outs):
        named = list(module.named_parameters())
        found = backward(target, outs, seed, [p for _, p in named])
        grads = {name: g for (name, _), g in zip(named, found)}
    return {"parameters": _parameter_shapes(module), "value": value, "grads": grads}


@probe
def autograd_function(target: Target, args: tuple, kwargs: dict, requires_grad: tuple | None = None,
                      seed: int = 0) -> dict:
    """``Fn.apply(*args)`` for a custom ``torch.autograd.Function``, the inputs flagged in `requires_grad`
    requiring grad (default: every floating-point tensor argument); backpropagate a fixed gradient.

    Returns the output (a list where it is a tuple or list), whether its ``grad_fn`` is the Function's
    own backward (not a gradient autograd derived from the forward's operations), and the gradient
    that reached each flagged input (None for the others; an all-zero gradient as None, as for
    `module_forward`). An error that the Function's backward raises is the outcome, as the call's is.
    """
    apply = getattr(target.obj, "apply", None)
    if not callable(apply):
        raise ProbeError(f"{target.name} has no apply(): it must be a subclass of torch.autograd.Function")
    args = list(args)
    if requires_grad is None:
        requires_grad = tuple(isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex()) for a in args)
    for i, flag in enumerate(requires_grad):
        if flag and i < len(args) and isinstance(args[i], torch.Tensor):
            args[i] = args[i].detach().requires_grad_(True)
    wrt = [a for a, flag in zip(args, requires_grad) if flag and isinstance(a, torch.Tensor)]
    raw = target.run(apply, *args, **kwargs)
    outs = outputs(raw, f"{target.name}.apply(...)")
    value = [tensor(o) for o in outs] if isinstance(raw, (tuple, list)) else tensor(raw)
    own = [getattr(o.grad_fn, "_forward_cls", None) is target.obj for o in outs if o.requires_grad]
    found = iter(backward(target, outs, seed, wrt))
    grads = [next(found) if flag and isinstance(a, torch.Tensor) else None for a, flag in zip(args, requires_grad)]
    return {"value": value, "uses_its_own_backward": bool(own) and all(own), "grads": grads}


@probe
def module_sgd(target: Target, args: tuple, kwargs: dict, inputs: tuple = (), labels: Any = None,
               state: dict | None = None, steps: int = 10, lr: float = 0.03) -> dict:
    """Train the module (moved to the inputs' device) by plain gradient descent on the squared error, as the notes do.

    Each step: ``loss = ((module(*inputs) - labels) ** 2).sum()``, backward, ``p -= lr * p.grad``.
    Returns the loss after each step and the final parameters.
    """
    module = _module(target, args, kwargs, state, inputs)
    losses = []
    for _ in range(steps):
        out = target.run(module, *inputs)
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            raise ProbeError("the module's output is not differentiable with respect to its parameters")
        loss = ((out - labels) ** 2).sum()
        module.zero_grad()
        target.drive(loss.backward)
        with torch.no_grad():
            for p in module.parameters():
                if p.grad is not None:
                    p -= lr * p.grad
        losses.append(float(loss.detach()))  # float() of a tensor that requires grad warns into the report
    return {"parameters": _parameter_shapes(module), "losses": losses,
            "state": {k: tensor(v) for k, v in module.state_dict().items()}}
