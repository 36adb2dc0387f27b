# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: custom Functions whose backward runs autograd where the watch once made an excuse for it:
# - in a thread it starts (threading, _thread): on a CPU no thread of autograd's own exists, yet a top-level
#   evaluation in another thread looked like one. Exp's gradient really comes from torch.autograd.grad in the
#   thread; GradCoeff and LinearFn run the engine there and return the honest gradient.
# - in a callback built of C builtins only (LegendreP3): an object whose `__index__` is
#   `functools.partial(next, ...)` over `itertools`/`map`, passed as a size to torch.zeros, runs
#   torch.autograd.grad while torch.zeros parses it: no Python frame, so no profile hook sees a callback.
#   Its gradient really comes from that grad.
# Holds because: a watched request runs autograd in the thread that asks for it, on every device (no device
# thread of autograd's own, even for CUDA tensors: torch.autograd.set_multithreading_enabled(False)), so an
# evaluation that starts at the top of any thread but the probe's is the student's, charged as backward and grad
# (on the CPU and on the CUDA stand-in alike: test_hostile's ..._costs_the_cuda_checks_too); and a call the mode
# saw with an argument that is not plain data is recorded at the dispatcher whole.
import functools
import itertools
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


def _grad_of_p3(x, grad_output):
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        return getattr(torch.autograd, "gr" + "ad")(0.5 * (5 * x ** 3 - 3 * x), x, grad_output)[0]


def _frameless(fn, *args):
    out = []
    # (torch reads the size twice before the mode's handler runs: the call waits for the third read)
    chain = itertools.chain(itertools.repeat(0, 2), filter(None, map(out.append, itertools.starmap(fn, [args]))),
                            itertools.repeat(0))
    torch.zeros(type("_Size", (), {"__index__": functools.partial(next, chain)})())
    return out[0]


class LegendreP3(_HonestLegendreP3):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return _frameless(_grad_of_p3, x, grad_output)


class LinearFn(_HonestLinearFn):
    @staticmethod
    def backward(ctx, *grad_outputs):
        _in_a_thread(_grad_of_exp, torch.zeros(1), raw=True)
        return getattr(_HonestLinearFn, "back" + "ward")(ctx, *grad_outputs)
