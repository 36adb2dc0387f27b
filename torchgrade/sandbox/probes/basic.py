"""General probes: call, call with gradients, views and storage, in-place operations, modules."""

from __future__ import annotations

from typing import Any

import torch

from . import ProbeError, Raised, Target, probe, raised, tensor


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


def _module(target: Target, args: tuple, kwargs: dict, state: dict | None) -> torch.nn.Module:
    module = target(*args, **kwargs)
    if not isinstance(module, torch.nn.Module):
        raise ProbeError(f"{target.name}(...) built a {type(module).__name__}, expected a torch.nn.Module")
    if state is not None:
        target.drive(module.load_state_dict, state)
    return module


def _parameter_shapes(module: torch.nn.Module) -> dict:
    return {name: tuple(p.shape) for name, p in module.named_parameters()}


@probe
def module_forward(target: Target, args: tuple, kwargs: dict, inputs: tuple = (), state: dict | None = None,
                   seed: int = 0) -> dict:
    """Build the module, load `state`, run forward on `inputs`, backpropagate a fixed gradient.

    Returns the registered parameter names and shapes, the output and each parameter's gradient.
    """
    module = _module(target, args, kwargs, state)
    raw = target.run(module, *inputs)
    out = tensor(raw)
    grads = {}
    if raw.requires_grad:
        target.drive(raw.backward, grad_seed(raw, seed))
        grads = {name: p.grad for name, p in module.named_parameters()}
    return {"parameters": _parameter_shapes(module), "value": out, "grads": grads}


@probe
def module_sgd(target: Target, args: tuple, kwargs: dict, inputs: tuple = (), labels: Any = None,
               state: dict | None = None, steps: int = 10, lr: float = 0.03) -> dict:
    """Train the module by plain gradient descent on the squared error, as the notes do.

    Each step: ``loss = ((module(*inputs) - labels) ** 2).sum()``, backward, ``p -= lr * p.grad``.
    Returns the loss after each step and the final parameters.
    """
    module = _module(target, args, kwargs, state)
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
