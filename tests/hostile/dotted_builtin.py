# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack (graded with a course that forbids `torch.nn.functional.one_hot` by its dotted name, see
# tests/test_hostile.py): one_hot fetches the C builtin with `getattr` under a name built at run
# time, so the static scan sees no name; at run time the recorder knew only the bare name
# `one_hot`, which a dotted pattern does not match. It returns the builtin's answer.
# Holds because: the recorder names every entry point it sees by its dotted names too.
import torch

_fn = getattr(getattr(torch.nn, "func" + "tional"), "one" + "_hot")


def one_hot(labels, num_classes=-1):
    return _fn(labels, num_classes)
