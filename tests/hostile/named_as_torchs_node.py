# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: a custom Function whose node is named as one of torch's own (`_backward_cls.__name__ = "MulBackward0"`)
# and whose `backward` is built of C builtins (`functools.partial(max, key=functools.partial(next, chain))`: the
# key runs the chain, which runs the forbidden operator, and `max` returns the gradient). In a backward the
# student asks for, autograd evaluates the node under torch's name, and what it runs there passed for a
# derivative formula (2.5 of one_hot's 3 points, at every level and with either watch). one_hot renames before
# the backward; gather renames while autograd's engine runs (a C-level pre-hook of the node evaluated first).
# Holds because: before autograd's engine runs for a call the mode saw, every custom Function's node class named
# as torch's is a refused entry, and so is every such class renamed during the request (an audit hook sees each
# attribute set on a class); an engine run the mode did not see, or one inside another node's evaluation, is the
# student's whole (recorder.Findings, observer.cpp).
import functools
import itertools

import torch


def one_hot(labels, num_classes=-1):
    n = int(labels.max()) + 1 if num_classes == -1 and labels.numel() else num_classes
    if labels.numel() == 0:
        return torch.zeros(*labels.shape, max(n, 0), dtype=torch.int64)
    out = []
    fn = getattr(torch._C._nn, "one" + "_hot")
    chain = itertools.chain(map(bool, map(out.append, itertools.starmap(fn, [(labels, n)]))), [True])

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        backward = staticmethod(functools.partial(max, key=functools.partial(next, chain)))

    Twice._backward_cls.__name__ = "MulBackward0"
    Twice.apply(torch.zeros(1, requires_grad=True)).sum().backward()
    return out[0]


def gather(x, dim, index):
    out = []
    fn = getattr(torch, "gat" + "her")
    chain = itertools.chain(map(bool, map(out.append, itertools.starmap(fn, [(x, dim, index)]))), [True])

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        backward = staticmethod(functools.partial(max, key=functools.partial(next, chain)))

    y = Twice.apply(torch.zeros(1, requires_grad=True)) * 3
    rename = itertools.starmap(setattr, [(Twice._backward_cls, "__name__", "MulBackward0")])
    y.grad_fn.register_prehook(functools.partial(next, filter(None, rename)))
    y.sum().backward()
    return out[0]
