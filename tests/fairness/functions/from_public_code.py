# expect: full marks
# Functions as public code writes them: Exp from PyTorch's "Extending torch.autograd" page, and the
# gradient-reversal layer of domain-adversarial training repositories, whose forward returns
# `x.new(x)` (a legacy constructor that, given a tensor, returns an alias of it). `Tensor.new` is a
# public method, not a private entry point: it once cost GradCoeff 0 / 2 as a "forbidden call".
import torch
from torch.autograd import Function


class Exp(Function):
    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


class GradCoeff(Function):
    @staticmethod
    def forward(ctx, x, coeff):
        ctx.coeff = coeff
        return x.new(x)

    @staticmethod
    def backward(ctx, grad_output):
        return ctx.coeff * grad_output, None
