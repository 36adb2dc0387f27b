"""Probes for functions.py: a custom ``torch.autograd.Function`` seen from the outside and from its node.

``function_apply`` runs ``Fn.apply`` and then calls the output's backward node directly
(``out.grad_fn.apply(grad)``) before any backward pass of the probe's own: that shows what the
student's ``backward`` returned before autograd reduces or checks it (an unsummed bias gradient,
a gradient where ``ctx.needs_input_grad`` says none is needed), and it runs that ``backward`` under
the forbidden-call watch (a backward pass run by autograd's engine is not watched). Only then does
autograd's engine compute the gradients that reach the inputs.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import torch

from torchgrade.probes import ProbeError, Raised, Target, probe, raised, tensor, grad_seed


def _apply(target: Target) -> Any:
    apply = getattr(target.obj, "apply", None)
    if not callable(apply):
        raise ProbeError(f"{target.name} has no apply(): it must be a subclass of torch.autograd.Function")
    return apply


def _inputs(args: tuple, requires_grad: tuple) -> list:
    args = list(args)
    for i, flag in enumerate(requires_grad):
        if flag:
            args[i] = args[i].detach().requires_grad_(True)
    return args


def _returned(value: Any, n_inputs: int) -> list:
    """What a backward returned, as a list of one item per forward input (trailing Nones beyond those
    are dropped, as autograd drops them)."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    while len(items) > n_inputs and items[-1] is None:
        items.pop()
    return [tensor(v, f"backward's gradient {i}") if isinstance(v, torch.Tensor) else v for i, v in enumerate(items)]


@probe
def function_apply(target: Target, args: tuple, kwargs: dict, requires_grad: tuple = (True,), seed: int = 0,
                   saved: bool = False, view_of_input: bool = False, raw_backward: bool = True) -> dict:
    """``Fn.apply(*args)`` with the inputs flagged in `requires_grad` requiring grad.

    Reports the output, whose backward node it has, optionally whether the node saved the output
    (`saved`) or the output shares storage with ``args[0]`` (`view_of_input`), what ``backward``
    returned for a fixed upstream gradient (only reported with `raw_backward`: where the contract
    leaves free what it returns for inputs that need no gradient, it is left out), and the
    gradients autograd delivers to the inputs.
    """
    apply = _apply(target)
    args = _inputs(args, requires_grad)
    raw = target.run(apply, *args, **kwargs)
    out = tensor(raw, f"{target.name}.apply(...)")
    node = raw.grad_fn
    own = node is not None and getattr(node, "_forward_cls", None) is target.obj
    facts: dict[str, Any] = {"value": out.clone()}
    if view_of_input:
        facts["shares_storage_with_input"] = out.untyped_storage().data_ptr() == args[0].untyped_storage().data_ptr()
    facts["grad_fn"] = f"{target.name}.backward" if own else (
        None if node is None else type(node).__name__)
    if saved:
        stored = target.drive(getattr, node, "saved_tensors") if own else ()
        facts["saved_result"] = any(
            isinstance(s, torch.Tensor) and s.shape == out.shape and bool(torch.equal(s.detach(), out)) for s in stored)
    wrt = [a for a, flag in zip(args, requires_grad) if flag]
    if not raw.requires_grad or not wrt:
        facts["backward_returned"] = facts["grads"] = None
        return facts
    grad = grad_seed(out, seed)
    # The node is called first: the watch records the student's own calls before the probe's backward.
    returned = _returned(target.drive(node.apply, grad), len(args)) if own else "not run: the grad_fn is not its own"
    facts["backward_returned"] = returned if raw_backward else "not compared"
    try:  # autograd checks what backward returned: its complaint is a fact like the others
        grads = target.drive(torch.autograd.grad, raw, wrt, grad, allow_unused=True)
        facts["grads"] = [None if g is None else g.detach() for g in grads]
    except Raised as e:
        facts["grads"] = raised(e.error)
    return facts


@probe
def function_gradcheck(target: Target, args: tuple, kwargs: dict, requires_grad: tuple = (True,)) -> dict:
    """``torch.autograd.gradcheck(Fn.apply, args)``: the backward against finite differences (float64 inputs).

    On the CPU every entry of the Jacobian is compared; on CUDA gradcheck's fast mode compares it along random
    directions (a wrong entry shows there too, and a failure is worked out entry by entry for the message):
    the CUDA variant is about the backward running on the device, and the CUDA stand-in pays for every
    operator of the full comparison (20 times the time for Conv2dFn)."""
    apply = _apply(target)
    args = tuple(_inputs(args, requires_grad))
    raw = target.run(apply, *args)
    tensor(raw, f"{target.name}.apply(...)")
    if getattr(raw.grad_fn, "_forward_cls", None) is not target.obj:  # else autograd's gradient is checked, not theirs
        return {"gradcheck": f"not run: the result's grad_fn is {type(raw.grad_fn).__name__}, not {target.name}'s own"}
    try:
        fast = any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args)
        target.drive(torch.autograd.gradcheck, apply, args, eps=1e-6, atol=1e-5, rtol=1e-3, fast_mode=fast)
    except Raised as e:
        if isinstance(e.error, NotImplementedError):
            raise
        return {"gradcheck": f"failed: {type(e.error).__name__}: {_gradcheck_summary(str(e.error), args, raw)}"}
    return {"gradcheck": "passed"}


_NUMBER = re.compile(r"-?(?:\d+\.?\d*(?:e[+-]?\d+)?|nan|inf)")


def _gradcheck_summary(text: str, args: tuple, out: torch.Tensor) -> str:
    """gradcheck's complaint in one line: its first line and, for a Jacobian mismatch, the first entry
    where the analytical Jacobian (from the student's backward) differs from the numerical one,
    instead of two printed matrices that no short message can hold whole."""
    lines = text.strip().splitlines()
    first = lines[0].rstrip(",") if lines else ""
    if "in slow mode:" in text:  # fast mode: the entries are in the slow-mode recomputation after its own figures
        text = text.split("in slow mode:", 1)[1].split("The max per-element")[0]
        text = text.replace("Numerical:", "numerical:").replace("Analytical:", "analytical:")
    found = re.search(r"with respect to input (\d+)", first)
    if "numerical:" not in text or "analytical:" not in text or not found:
        return first
    numerical, analytical = text.split("numerical:", 1)[1].split("analytical:", 1)
    numerical, analytical = (_NUMBER.findall(t.split("dtype=")[0].split("device=")[0]) for t in (numerical, analytical))
    columns = out.numel()
    if len(numerical) != len(analytical) or not columns:
        return first
    wrong = [i for i, (n, a) in enumerate(zip(numerical, analytical))
             if abs(float(n) - float(a)) > 1e-4 + 1e-3 * abs(float(n)) or (n == "nan") != (a == "nan")]
    if not wrong:
        return first
    i = wrong[0]
    return (f"{first}: {len(wrong)} of {len(numerical)} entries differ; d(out[{i % columns}])/d(in[{i // columns}]) "
            f"is {analytical[i]} by your backward, {numerical[i]} by finite differences")


def _graph_nodes(root: Any, limit: int = 10_000) -> list:
    seen, todo, nodes = set(), [root], []
    while todo and len(nodes) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        todo.extend(n for n, _ in getattr(node, "next_functions", ()))
    return nodes


@probe
def function_model(target: Target, args: tuple, kwargs: dict, requires_grad: tuple = (), uses: str = "",
                   seed: int = 0) -> dict:
    """Call a function built on custom Functions; report the output, whether the graph holds a node
    of the module's class `uses`, and the gradients that reach the inputs flagged in `requires_grad`."""
    args = _inputs(args, requires_grad)
    raw = target(*args, **kwargs)
    out = tensor(raw, f"{target.name}'s result")
    module = sys.modules.get(getattr(target.obj, "__module__", ""), None)
    cls = getattr(module, uses, None)
    facts: dict[str, Any] = {"value": out.clone(), "graph_uses_function": cls is not None and any(
        getattr(n, "_forward_cls", None) is cls for n in _graph_nodes(raw.grad_fn))}
    wrt = [a for a, flag in zip(args, requires_grad) if flag]
    if raw.requires_grad and wrt:
        grads = target.drive(torch.autograd.grad, raw, wrt, grad_seed(out, seed), allow_unused=True)
        facts["grads"] = [None if g is None else g.detach() for g in grads]
    else:
        facts["grads"] = None
    return facts
