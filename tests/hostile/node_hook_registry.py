# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: view as a node post-hook's sum and then view (they look like the engine's reduction of a gradient), with
# the hook kept by a registry of the student's own. Autograd's C++ looks up `torch.autograd.Function._register_hook`
# at each `grad_fn.register_hook`: a registry set on the class and taken away again between the watch's looks
# (setting a class's attribute is not an audited event) keeps a hook of C builtins unwrapped.
# Holds because: the sandbox sets the registry on torch.autograd.Function itself and makes that class and its
# metaclass immutable types (recorder.guard_switches): `type.__setattr__` raises, and the hook goes through the
# grader's registry, which makes it a refused entry. It forged 3.81 of view's 4 points before (issue 47).
import collections
import functools

import torch

import hostile_kit as kit


def _keep(hooks, hook):
    hooks = collections.OrderedDict() if hooks is None else hooks
    hooks[len(hooks)] = hook
    return hooks, torch.utils.hooks.RemovableHandle(hooks)


def view(x, *shape):
    key, out = kit.frameless_chain((torch.sum, x), (getattr(torch.Tensor, "vi" + "ew"), x, *shape))
    y = torch.zeros(1, requires_grad=True) * 2
    registry = torch.autograd.Function
    try:
        type.__setattr__(registry, "_register_hook", staticmethod(_keep))
    except Exception:
        pass
    try:  # (a post-hook gets grad_inputs and grad_outputs: `max` calls the key on each, and gives one back)
        y.grad_fn.register_hook(functools.partial(max, key=key))
    finally:
        try:
            type.__delattr__(registry, "_register_hook")
        except Exception:
            pass
    y.sum().backward()
    return out[1]
