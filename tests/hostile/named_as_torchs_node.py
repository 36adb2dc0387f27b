# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: a custom Function whose node is named as one of torch's own (`_backward_cls.__name__ = "MulBackward0"`)
# and whose `backward` is built of C builtins (`functools.partial(max, key=functools.partial(next, chain))`: the
# key runs the chain, which runs one_hot, and `max` returns the gradient). In a backward the student asks for,
# autograd evaluates the node under torch's name, and what it runs there passes for a derivative formula.
# Open (SECURITY.md): the watch tells torch's own nodes from a custom Function's by the name autograd records
# (the profile holds nothing else), and a custom node's name is its class's, which the student chooses. Graded by
# an xfail(strict) test in test_hostile.py: the test fails once a defence holds.
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
