# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: torch's own Python code, run for a call the mode saw (whose operators are excused as torch's
# implementation), made to call a forbidden operator through state the student set and put back: a global of
# torch.nn.functional (one_hot: `F.relu` calls `torch.relu`, here a partial over one_hot), a class attribute of
# torch.Tensor (gather: `len(x)` runs Tensor.__len__, which reads `self.shape`, here a property whose getter runs
# gather). No frame of the student's runs inside the seen call; each is put back before the target returns, and
# each comes after an honest seen call of the same kind in the same request.
# Holds because: the dictionaries of installed modules and their classes are compared with what they held before
# any student code ran (torchgrade.sandbox.installed_state), where torch's code ran for a seen call and when the
# request ends: a value that is not torch's own, or one set and put back while torch's code ran, is a refused entry.
# It forged 2.5 of one_hot's 3 points and 2.5 of gather's 3 before (issue 47).
import functools
import itertools
import types

import torch
import torch.nn.functional as F


def one_hot(labels, num_classes=-1):
    n = int(labels.max()) + 1 if num_classes == -1 and labels.numel() else num_classes
    if labels.numel() == 0:
        return torch.zeros(*labels.shape, max(n, 0), dtype=torch.int64)
    F.relu(labels)  # (an honest call first)
    fn = getattr(torch._C._nn, "one" + "_hot")
    real = F.torch
    F.torch = types.SimpleNamespace(relu=functools.partial(fn, num_classes=n))
    try:
        return F.relu(labels)
    finally:
        F.torch = real


def gather(x, dim, index):
    len(x) if x.dim() else None  # (an honest call first)
    out = []
    fn = getattr(torch, "gat" + "her")
    getter = functools.partial(next, map(out.append, itertools.starmap(fn, [(x, dim, index)])))
    torch.Tensor.shape = property(getter)
    try:
        len(index)
    except Exception:
        pass
    finally:
        del torch.Tensor.shape
    return out[0]
