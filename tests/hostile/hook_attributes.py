# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: the forbidden operator runs in a hook built of C builtins that no registration call ever saw: set as
# a tensor's hook dictionary (`_backward_hooks`, then `grad_fn._register_hook_dict`: gather, and view, which is
# also one of the engine's own steps there), and as a leaf's post-accumulate-grad hooks
# (`_post_accumulate_grad_hooks`: scatter_). Autograd runs them inside the evaluation of a node
# of torch's own, in a backward the student asks for; `functools.partial(next, chain)` runs no Python frame.
# Holds because: in the evaluation of torch's own node only its derivative formula (the node's own range) and
# the engine's own steps, each in its place, are torch's (recorder._engine_step: retain_grad's clone before the
# range; right after it, the sums that reduce a broadcast gradient, each with the view right after it; the input
# buffer's additions last; AccumulateGrad's detach and add in its range): any other operator there, or one out of
# its place (a view before the node's range), ran in a hook and is the student's, in both watches
# (recorder.Findings, observer.cpp).
import collections
import functools
import itertools

import torch


def _in_a_tensor_hook(fn, *args):
    """fn(*args), run by a hook of C builtins set as a tensor's hook dictionary, inside a backward."""
    out = []
    chain = filter(None, map(out.append, itertools.starmap(fn, [args])))
    src = torch.zeros(1, requires_grad=True)
    y = src * 2
    y._backward_hooks = collections.OrderedDict({0: functools.partial(next, chain)})
    y.grad_fn._register_hook_dict(y)
    y.sum().backward()
    return out[0]


def gather(x, dim, index):
    return _in_a_tensor_hook(getattr(torch, "gat" + "her"), x, dim, index)


def view(x, *shape):
    return _in_a_tensor_hook(getattr(torch.Tensor, "vi" + "ew"), x, *shape)


def scatter_(target, dim, index, src):
    fn = getattr(torch.Tensor, "scat" + "ter_")
    done = []
    chain = map(done.append, itertools.starmap(fn, [(target, dim, index, src)]))
    leaf = torch.zeros(1, requires_grad=True)
    leaf._post_accumulate_grad_hooks = collections.OrderedDict({0: functools.partial(next, chain)})
    (leaf * 2).sum().backward()
    return target
