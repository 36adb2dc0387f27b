# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: the targets are compiled under file names outside the submission, one that looks like
# torch's and torch's real file itself, so no frame on the stack is the submission's: corr2d runs
# conv2d, pad2d runs F.pad, pool2d runs the pooling functions. Each returns the builtin's answer.
# Holds because: everything inside a request window is the target's, whoever's frame is on the stack,
# and code compiled at run time under an installed file's name is not that file's code.
import torch

_SOURCE = '''
import torch
import torch.nn.functional as F

def corr2d(X, K):
    return getattr(F, "con" + "v2d")(X[None, None], K[None, None].to(X.dtype))[0, 0]

def pad2d(X, padding):
    p = (padding, padding) if isinstance(padding, int) else tuple(padding)
    return getattr(F, "pa" + "d")(X, (p[1], p[1], p[0], p[0]))
'''
_POOL = '''
import torch.nn.functional as F

def pool2d(X, pool_size, mode="max", stride=1, padding=0):
    h, w = (pool_size, pool_size) if isinstance(pool_size, int) else pool_size
    fn = getattr(F, ("max" if mode == "max" else "avg") + "_pool2d")
    return fn(X[None], (h, w), stride, padding)[0] if X.dim() == 3 else fn(X[None, None], (h, w), stride, padding)[0, 0]
'''
_made = {}
exec(compile(_SOURCE, "<torch/nn/functional.py>", "exec"), _made)
exec(compile(_POOL, torch.nn.functional.__file__, "exec"), _made)
corr2d, pad2d, pool2d = _made["corr2d"], _made["pad2d"], _made["pool2d"]
