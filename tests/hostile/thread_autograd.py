# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: custom Functions whose backward runs autograd in a thread it starts (threading, _thread): on a
# CPU no thread of autograd's own exists, yet a top-level evaluation in another thread looked like one.
# Exp's gradient really comes from torch.autograd.grad in the thread; the others run the engine there and
# return the honest gradient.
# Holds because: on a CPU (no CUDA device guard) autograd has no device threads: an evaluation that starts
# at the top of any thread but torch's intra-op pool is the student's, charged as backward and grad.
import _thread
import threading

import torch

_HonestExp, _HonestGradCoeff, _HonestLegendreP3, _HonestLinearFn = Exp, GradCoeff, LegendreP3, LinearFn


def _grad_of_exp(x):
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        y = x.exp()
        return getattr(torch.autograd, "gr" + "ad")(y, x, torch.ones_like(y))[0]


def _in_a_thread(work, *args, raw=False):
    out, done = [], threading.Event()

    def run():
        try:
            out.append(work(*args))
        finally:
            done.set()

    if raw:
        _thread.start_new_thread(run, ())
    else:
        threading.Thread(target=run).start()
    done.wait()
    return out[0]


class Exp(_HonestExp):
    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * _in_a_thread(_grad_of_exp, result.log()).to(grad_output.dtype)


class GradCoeff(_HonestGradCoeff):
    @staticmethod
    def backward(ctx, grad_output):
        _in_a_thread(_grad_of_exp, torch.zeros(1), raw=True)
        return getattr(_HonestGradCoeff, "back" + "ward")(ctx, grad_output)


class LegendreP3(_HonestLegendreP3):
    @staticmethod
    def backward(ctx, grad_output):
        _in_a_thread(_grad_of_exp, torch.zeros(1))
        return getattr(_HonestLegendreP3, "back" + "ward")(ctx, grad_output)


class LinearFn(_HonestLinearFn):
    @staticmethod
    def backward(ctx, *grad_outputs):
        _in_a_thread(_grad_of_exp, torch.zeros(1), raw=True)
        return getattr(_HonestLinearFn, "back" + "ward")(ctx, *grad_outputs)
