"""The built-in probes a course's checks ask for (torchgrade/sandbox/probes/basic.py), run directly: what
they report for modules (moved to the inputs' device, tuple outputs, gradients that are None or all
zeros) and for custom autograd Functions. The same probe runs on both sides of a check, so a fact here
is what a check compares."""

from __future__ import annotations

import torch

from torchgrade.engine import compare
from torchgrade.sandbox import standin
from torchgrade.sandbox.probes import Target, run_probe


def outcome(probe: str, obj, args=(), on_standin=False, **options):
    return run_probe(probe, Target(obj, getattr(obj, "__name__", "target")), tuple(args), {}, options,
                     on_standin=on_standin)


class TwoHeads(torch.nn.Module):
    """A tuple output, and a parameter the output does not depend on (a gradient of zeros or None)."""

    def __init__(self, zero_grad: bool = True):
        super().__init__()
        self.body = torch.nn.Linear(3, 2)
        self.spare = torch.nn.Parameter(torch.ones(2))
        self.zero_grad_spare = zero_grad

    def forward(self, x):
        y = self.body(x)
        return (y, y * 2 + self.spare * 0) if self.zero_grad_spare else (y, y * 2)


def test_module_forward_moves_the_module_to_the_inputs_device_as_model_to_does():
    """On CUDA both sides raised "Expected all tensors to be on the same device" before: a check that measured nothing."""
    torch.manual_seed(0)
    x = standin.to_standin(torch.ones(4, 3))
    got = outcome("module_forward", lambda: torch.nn.Linear(3, 1), (), on_standin=True, inputs=(x,))
    assert "value" in got and "__raised__" not in got["value"], got
    assert got["value"]["value"].device.type == "cuda" and got["value"]["grads"]["weight"].device.type == "cuda"


def test_module_forward_takes_tuple_outputs_and_a_zero_gradient_equals_none():
    """Fairness rules: where the reference's gradient is all zeros, a parameter that gets none is equally right,
    and the reverse; a tuple output is compared element by element."""
    x = torch.ones(4, 3)
    torch.manual_seed(0)
    zeros = outcome("module_forward", TwoHeads, (True,), inputs=(x,))["value"]
    torch.manual_seed(0)
    none = outcome("module_forward", TwoHeads, (False,), inputs=(x,))["value"]
    assert isinstance(zeros["value"], list) and len(zeros["value"]) == 2
    assert zeros["grads"]["spare"] is None and none["grads"]["spare"] is None
    compare.compare(zeros, none)  # no Mismatch: the same outcome
    torch.manual_seed(0)
    other = outcome("module_forward", TwoHeads, (True,), inputs=(x,), seed=1)["value"]
    try:
        compare.compare(zeros, other)
    except compare.Mismatch as e:
        assert "grads" in e.path
    else:
        raise AssertionError("another upstream gradient gave the same gradients")


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x ** 3 * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * ctx.k * grad, None


class CubeByAutograd(torch.autograd.Function):  # a backward that is not its own: the forward's ops differentiated
    @staticmethod
    def forward(ctx, x, k):
        return x ** 3 * k

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("never called")

    @classmethod
    def apply(cls, x, k):
        return x ** 3 * k


class CubeWrongBackward(Cube):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * grad, None  # k forgotten


class CubeRaisingBackward(Cube):
    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("backward not done")


def test_the_autograd_function_probe_reports_value_own_backward_and_gradients():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    right = outcome("autograd_function", Cube, (x, 2))["value"]
    assert right["uses_its_own_backward"] is True and right["grads"][1] is None
    assert torch.equal(right["value"], x ** 3 * 2)
    derived = outcome("autograd_function", CubeByAutograd, (x, 2))["value"]
    assert derived["uses_its_own_backward"] is False
    compare.compare(right["grads"], derived["grads"])  # the same numbers, but not from its own backward
    wrong = outcome("autograd_function", CubeWrongBackward, (x, 2))["value"]
    assert not torch.allclose(wrong["grads"][0], right["grads"][0])
    assert outcome("autograd_function", CubeRaisingBackward, (x, 2))["value"]["__raised__"] == "RuntimeError"
    assert "no apply()" in outcome("autograd_function", lambda x: x, (x,))["probe_error"]
    on_cuda = outcome("autograd_function", Cube, (standin.to_standin(x), 2), on_standin=True)["value"]
    assert on_cuda["grads"][0].device.type == "cuda" and on_cuda["uses_its_own_backward"] is True
