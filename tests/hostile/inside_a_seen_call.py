# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: the forbidden operation runs inside a call the recorder already saw, from code torch calls
# back: gather from the `__index__` of an object passed to torch.zeros, scatter_ from a
# saved_tensors_hooks pack hook inside torch.mul, view from the student's own TorchDispatchMode inside
# torch.zeros(0). The mode is off inside a call it saw, and the dispatcher was not recorded there.
# Each returns the forbidden operation's answer.
# Holds because: code that torch calls back from inside a seen call, and is not torch's own, is
# watched like the target's own code (torchgrade.sandbox.recorder, callbacks).
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _Index:
    def __init__(self, work):
        self.work, self.out = work, None

    def __index__(self):
        if self.out is None:
            self.out = self.work()
        return 0


def gather(x, dim, index):
    box = _Index(lambda: getattr(x, "gat" + "her")(dim, index))
    torch.zeros(box)
    return box.out


def scatter_(target, dim, index, src):
    done = []

    def pack(t):
        if not done:
            done.append(getattr(target, "scatter" + "_")(dim, index, src))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        a = torch.ones(1, requires_grad=True)
        torch.mul(a, a)
    return done[0]


class _Mode(TorchDispatchMode):
    def __init__(self, work):
        super().__init__()
        self.work, self.out = work, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.out is None:
            self.out = [None]
            self.out = [self.work()]
        return func(*args, **(kwargs or {}))


def view(x, *shape):
    mode = _Mode(lambda: getattr(x, "vi" + "ew")(*shape))
    with mode:
        torch.zeros(0)
    return mode.out[0]
