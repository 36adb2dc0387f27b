# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: one_hot's forbidden operator runs as a pre-hook of an autograd node, built of C builtins only.
# `grad_fn.register_prehook` is a method of the node (not a call the mode sees), and autograd calls the hook
# inside a backward the student asks for: `functools.partial(next, chain)` gets the grad outputs as next's
# default, so the chain runs one_hot and the hook returns them unchanged. No Python frame runs.
# Open (SECURITY.md): autograd runs a node's hooks inside the evaluation of that node, beside torch's own work
# there (the gradients it adds up, the sums that reduce a broadcast gradient), so the watch cannot tell a hook's
# operators from torch's; node methods cannot be replaced to check the hook given. Graded by an xfail(strict)
# test in test_hostile.py: it forges 2.5 of one_hot's 3 points, and the test fails once a defence holds.
import functools
import itertools

import torch


def one_hot(labels, num_classes=-1):
    n = int(labels.max()) + 1 if num_classes == -1 and labels.numel() else num_classes
    if labels.numel() == 0:
        return torch.zeros(*labels.shape, max(n, 0), dtype=torch.int64)
    out = []
    fn = getattr(torch._C._nn, "one" + "_hot")
    chain = filter(None, map(out.append, itertools.starmap(fn, [(labels, n)])))
    src = torch.zeros(1, requires_grad=True)
    y = src * 2
    y.grad_fn.register_prehook(functools.partial(next, chain))
    y.sum().backward()
    return out[0]
