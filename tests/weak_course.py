"""A course whose checks are weak on purpose, each weakness one that `torchgrade audit` must report.

- `masked_softmax`'s checks never give a mask: the `masked_fill(~mask, ...)` line runs under no check
  (and no mutation operator changes it);
- `run_rnn`'s checks give one-step sequences only: the loop's body, the carry `h = _cell(x[:, t], h, w)`,
  never runs twice in one call;
- equivalent-mutants.yaml marks `x @ w + h` made `x @ w - h` equivalent ("h0 is always zero"): false, as
  any other `h0` shows;
- `one step on the device` gives `w` on the CPU and the rest on the check's device: on CUDA (the
  stand-in here) the reference raises, so that check measures nothing there.
"""

from __future__ import annotations

import uuid
from pathlib import Path

REFERENCE = '''\
"""Attention weights and a recurrent net."""

import torch


def masked_softmax(scores, mask=None):
    """Softmax of ``scores`` over its last dim; where the bool ``mask`` (broadcastable) is False, the weight is 0."""
    # BEGIN SOLUTION
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)
    # END SOLUTION


def run_rnn(x, h0, w):
    """The last state of ``h = tanh(x[:, t] @ w + h)`` over the steps of ``x`` (dim 1), from ``h0``."""
    # BEGIN SOLUTION
    h = h0
    for t in range(x.shape[1]):
        h = _cell(x[:, t], h, w)
    return h
    # END SOLUTION


def _cell(x, h, w):
    return torch.tanh(x @ w + h)
'''

CHECKS = '''\
import pytest
import torch


@pytest.mark.target("masked_softmax")
def test_softmax_over_the_last_dim(check):
    check(torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]]))


@pytest.mark.target("run_rnn")
def test_one_step(check):
    check(torch.linspace(-1, 1, 6).reshape(2, 1, 3), torch.zeros(2, 4), torch.linspace(-0.5, 0.5, 12).reshape(3, 4))


@pytest.mark.target("run_rnn")
def test_one_step_on_the_device(check, device):
    check(torch.ones(2, 1, 3, device=device), torch.zeros(2, 4, device=device), torch.full((3, 4), 0.1))
'''

EQUIVALENT = '''\
seq.run_rnn:
  - mutant: "return torch.tanh(x @ w + h)  →  return torch.tanh(x @ w - h)"
    reason: h0 is always zero (false on purpose)
'''

ASSIGNMENT = """\
title: A weak sequence course
reference: reference
checks: {checks}/checks
stubs: reference
time_limit: 10
cuda_standin: score
exercises:
  seq:
    targets:
      masked_softmax: 1
      run_rnn: 2
"""

#: Lines of REFERENCE (1-based), as the audit must name them.
MASK_LINE = 10
LOOP_LINE = 19
CARRY_LINE = 20


def make_course(root: Path) -> Path:
    """Write the course under root; return its assignment file (the checks in a folder of a unique name,
    so that several such courses can be collected in one process)."""
    graders = f"weakgraders_{uuid.uuid4().hex[:10]}"
    files = {"assignment.yaml": ASSIGNMENT.format(checks=graders), "reference/seq.py": REFERENCE,
             f"{graders}/checks/visible/test_seq.py": CHECKS, f"{graders}/equivalent-mutants.yaml": EQUIVALENT}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert REFERENCE.splitlines()[MASK_LINE - 1].strip().startswith("scores = scores.masked_fill(~mask")
    assert REFERENCE.splitlines()[CARRY_LINE - 1].strip() == "h = _cell(x[:, t], h, w)"
    return root / "assignment.yaml"
