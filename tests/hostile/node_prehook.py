# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: one_hot's forbidden operator runs as a pre-hook of an autograd node, built of C builtins only.
# `grad_fn.register_prehook` is a method of the node (not a call the mode sees), and autograd calls the hook
# inside a backward the student asks for: `functools.partial(next, chain)` gets the grad outputs as next's
# default, so the chain runs one_hot and the hook returns them unchanged. No Python frame runs.
# Holds because: in the evaluation of torch's own node only its derivative formula (the node's own range, at the
# backward scope) and the engine's own steps, each in its place, are torch's (recorder._engine_step): one_hot
# there ran in a hook, and is the student's, in both watches (recorder.Findings, observer.cpp). It forged 2.5 of
# one_hot's 3 points before (issue 47). view's post-hook runs a sum and then a view, which look like the engine's
# reduction of a gradient: a hook given to a node that is not the student's Python code is a refused entry
# (recorder._register_node_hook, where autograd keeps node hooks). tests/hostile/hook_attributes.py sets hooks
# without any registration call.
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


def view(x, *shape):
    # A post-hook of the node (`grad_fn.register_hook`) runs after the engine reduces the node's gradients: a sum and
    # then a view there look like that reduction. `max(grad_inputs, grad_outputs, key=...)` calls the key twice (the
    # sum, then x's view) and gives back grad_inputs unchanged.
    out = []
    steps = itertools.chain(itertools.starmap(torch.sum, [(x,)]),
                            itertools.starmap(getattr(torch.Tensor, "vi" + "ew"), [(x, *shape)]))
    key = functools.partial(next, map(bool, map(out.append, steps)))
    src = torch.zeros(1, requires_grad=True)
    y = src * 2
    y.grad_fn.register_hook(functools.partial(max, key=key))
    y.sum().backward()
    return out[1]
