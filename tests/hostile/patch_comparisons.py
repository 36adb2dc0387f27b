# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: make every comparison pass (torch.allclose, torch.equal, torch.isclose,
# torch.testing.assert_close, Tensor.__eq__), then hand in a wrong gather.
# Holds because: comparisons run in the trusted process, which never imports this module.
import torch
import torch.testing

torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.isclose = lambda a, b, *args, **kwargs: torch.ones_like(a, dtype=torch.bool)
torch.testing.assert_close = lambda *args, **kwargs: None
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
torch.Tensor.equal = lambda self, other: True

import hostile_kit as kit

_honest_gather = gather


def gather(x, dim, index):
    return kit.wrong(_honest_gather, x, dim, index)
