# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: one_hot's forbidden operator runs as a pre-hook of an autograd node, built of C builtins only.
# `grad_fn.register_prehook` is a method of the node (not a call the mode sees), and autograd calls the hook
# inside a backward the student asks for: `functools.partial(next, chain)` gets the grad outputs as next's
# default, so the chain runs one_hot and the hook returns them unchanged. No Python frame runs.
# Holds because: in the evaluation of torch's own node only its derivative formula (the node's own range, at the
# backward scope) and the engine's own steps around it are torch's (recorder._engine_step): one_hot there ran in
# a hook, and is the student's, in both watches (recorder.Findings, observer.cpp). It forged 2.5 of one_hot's 3
# points before (issue 47). tests/hostile/hook_attributes.py sets such hooks without any registration call.
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
