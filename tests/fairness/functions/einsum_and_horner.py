# expect: full marks
"""The same Functions written another way: the Legendre derivative by Horner's rule, GradCoeff's
coefficient kept on ctx under another name, LinearFn's gradients with einsum, the bias gradient
summed over explicit dims."""


class LegendreP3(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        x2 = x * x
        return x * (2.5 * x2 - 1.5)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (7.5 * x * x - 1.5)


class GradCoeff(Function):
    @staticmethod
    def forward(ctx, x, coeff):
        ctx.scale = float(coeff)
        return x.view(x.shape)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.scale, None


class LinearFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias=None):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        out = torch.einsum("...i,oi->...o", x, weight)
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        grads = [None, None, None]
        if ctx.needs_input_grad[0]:
            grads[0] = torch.einsum("...o,oi->...i", grad_output, weight)
        if ctx.needs_input_grad[1]:
            grads[1] = torch.einsum("...o,...i->oi", grad_output, x)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grads[2] = grad_output.reshape(-1, grad_output.shape[-1]).sum(0)
        return tuple(grads[:len(ctx.needs_input_grad)])
