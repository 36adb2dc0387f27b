# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: view as a node post-hook's sum and then view (they look like the engine's reduction of a gradient), with
# the hook kept by a registry of the student's own. Autograd's C++ looks up `torch.autograd.Function._register_hook`
# at each `grad_fn.register_hook`: a registry set on the class and taken away again between the watch's looks
# (setting a class's attribute is not an audited event) keeps a hook of C builtins unwrapped.
# Holds because: the registry is a data descriptor of the class's metaclass (recorder._NodeHookRegistry), which wins
# over anything set on the class or its bases; setting it is refused and charged, and the metaclass can be neither
# changed nor replaced (it is made an immutable type). It forged 3.81 of view's 4 points before (issue 47).
import collections
import functools
import itertools

import torch


def _keep(hooks, hook):
    hooks = collections.OrderedDict() if hooks is None else hooks
    hooks[len(hooks)] = hook
    return hooks, torch.utils.hooks.RemovableHandle(hooks)


def view(x, *shape):
    out = []
    steps = itertools.chain(itertools.starmap(torch.sum, [(x,)]),
                            itertools.starmap(getattr(torch.Tensor, "vi" + "ew"), [(x, *shape)]))
    key = functools.partial(next, map(bool, map(out.append, steps)))
    src = torch.zeros(1, requires_grad=True)
    y = src * 2
    registry = torch.autograd.Function
    try:
        type.__setattr__(registry, "_register_hook", staticmethod(_keep))
    except Exception:
        pass
    try:
        y.grad_fn.register_hook(functools.partial(max, key=key))
    finally:
        try:
            type.__delattr__(registry, "_register_hook")
        except Exception:
            pass
    y.sum().backward()
    return out[1]
