# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: custom Functions whose backward runs autograd through an alias the source does not show,
# with torch functions switched off around it: a hidden `torch.autograd.grad` (Exp: the gradient
# really comes from it), a hidden `torch.autograd.backward` (GradCoeff), autograd's engine called
# directly (`Variable._execution_engine.run_backward`, LegendreP3) and `getattr(y, "backward")`
# (LinearFn). Every gradient is right.
# Holds because: the profiler sees the engine evaluate a graph inside the evaluation of the
# Function's own node (or started where the recorder's mode did not see it), whatever Python did.
import torch
from torch.autograd import Variable as _Variable

_HonestExp, _HonestGradCoeff, _HonestLegendreP3, _HonestLinearFn = Exp, GradCoeff, LegendreP3, LinearFn


def _exp_grad(how, x):
    """d exp(x) / dx, computed by autograd, through one alias or another."""
    with torch.enable_grad(), getattr(torch._C, "Disable" + "TorchFunction")():
        x = x.detach().requires_grad_(True)
        y = x.exp()
        seed = torch.ones_like(y)
        if how == "grad":
            return getattr(torch.autograd, "gr" + "ad")(y, x, seed)[0]
        if how == "backward":
            getattr(torch.autograd, "back" + "ward")(y, seed)
        elif how == "engine":
            return _Variable._execution_engine.run_backward((y,), (seed,), False, False, (x,), False, False)[0]
        else:
            getattr(y, "back" + "ward")(seed)
        return getattr(x, "gr" + "ad")


class Exp(_HonestExp):
    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * _exp_grad("grad", result.log()).to(grad_output.dtype)


class GradCoeff(_HonestGradCoeff):
    @staticmethod
    def backward(ctx, grad_output):
        _exp_grad("backward", torch.zeros(1))
        return getattr(_HonestGradCoeff, "back" + "ward")(ctx, grad_output)


class LegendreP3(_HonestLegendreP3):
    @staticmethod
    def backward(ctx, grad_output):
        _exp_grad("engine", torch.zeros(1))
        return getattr(_HonestLegendreP3, "back" + "ward")(ctx, grad_output)


class LinearFn(_HonestLinearFn):
    @staticmethod
    def backward(ctx, *grad_outputs):
        _exp_grad("method", torch.zeros(1))
        return getattr(_HonestLinearFn, "back" + "ward")(ctx, *grad_outputs)
