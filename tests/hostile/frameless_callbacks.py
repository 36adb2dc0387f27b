# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: the forbidden operation runs inside a call the recorder saw, called back by torch through an
# object of the student's whose `__index__` is built of C builtins only (`functools.partial(next, ...)`
# over `itertools`/`map`): no Python frame runs, so no profile hook sees a callback. torch.zeros parses the
# object as a size while it runs, and the chain applies the forbidden operator (gather, view, scatter_,
# one_hot) and keeps its answer, which each target returns.
# Holds because: a call the mode saw with an argument that is not plain data (a type of the student's,
# a callable that runs no Python code) is recorded at the dispatcher whole: what it runs is charged by name.
import functools
import itertools

import torch


def _unseen(fn, *args):
    out = []
    # (torch reads the size twice before the mode's handler runs: the forbidden call waits for the third read,
    # made while torch.zeros runs, after the mode saw it)
    chain = itertools.chain(itertools.repeat(0, 2), filter(None, map(out.append, itertools.starmap(fn, [args]))),
                            itertools.repeat(0))
    size = type("_Size", (), {"__index__": functools.partial(next, chain)})()
    torch.zeros(size)
    return out[0]


def gather(x, dim, index):
    return _unseen(getattr(torch, "gat" + "her"), x, dim, index)


def view(x, *shape):
    return _unseen(getattr(x, "vi" + "ew"), *shape)


def scatter_(target, dim, index, src):
    return _unseen(getattr(target, "scat" + "ter_"), dim, index, src)


def one_hot(labels, num_classes):
    return _unseen(getattr(torch.nn.functional, "one" + "_hot"), labels, num_classes)
