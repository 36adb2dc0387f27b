# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: the forbidden operator runs in a hook built of C builtins that no registration call ever saw: set as
# a tensor's hook dictionary (`_backward_hooks`, then `grad_fn._register_hook_dict`), and as a leaf's
# post-accumulate-grad hooks (`_post_accumulate_grad_hooks`). Autograd runs them inside the evaluation of a node
# of torch's own, in a backward the student asks for; `functools.partial(next, chain)` runs no Python frame.
# Holds because: in the evaluation of torch's own node only its derivative formula (the node's own range) and
# the engine's own steps around it (recorder._ENGINE_STEPS: the sums that reduce a broadcast gradient, the
# additions of the input buffer, AccumulateGrad's detach and add) are torch's; any other operator there ran in a
# hook and is the student's, in both watches (recorder.Findings, observer.cpp).
import collections
import functools
import itertools

import torch


def gather(x, dim, index):
    out = []
    fn = getattr(torch, "gat" + "her")
    chain = filter(None, map(out.append, itertools.starmap(fn, [(x, dim, index)])))
    src = torch.zeros(1, requires_grad=True)
    y = src * 2
    y._backward_hooks = collections.OrderedDict({0: functools.partial(next, chain)})
    y.grad_fn._register_hook_dict(y)
    y.sum().backward()
    return out[0]


def scatter_(target, dim, index, src):
    fn = getattr(torch.Tensor, "scat" + "ter_")
    done = []
    chain = map(done.append, itertools.starmap(fn, [(target, dim, index, src)]))
    leaf = torch.zeros(1, requires_grad=True)
    leaf._post_accumulate_grad_hooks = collections.OrderedDict({0: functools.partial(next, chain)})
    (leaf * 2).sum().backward()
    return target
