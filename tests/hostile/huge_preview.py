# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: broadcast_shape returns a bool tensor of shape (2,)*24 made of one byte (all strides 0):
# cheap to send, 16 million elements to show. The trusted side wrote its message with
# `clip(repr(actual), 80)`: every element formatted before the cut, minutes of the grader's CPU per
# check (a day at shape (2,)*31), with no limit.
# Holds because: a value is shown by a bounded preview (torchgrade/engine/bounds.py), whose cost does not
# grow with the value; and the trusted side's work on a check has a time budget.
import torch


def broadcast_shape(*shapes):
    return torch.zeros(1, dtype=torch.bool).as_strided((2,) * 24, (0,) * 24)
