"""`torchgrade init`: a working course to copy from, as `pytest` has its first test file.

The course holds one exercise (`activations.relu`) with a reference solution, its generated stub,
visible and hidden checks (built-in probes and one of the course's own), a hint and the words for
its probe's fact. It grades the reference at full marks and the stub at zero as it is.
"""

from __future__ import annotations

from pathlib import Path

from torchgrade.authoring.stubs import generate_stubs

FILES: dict[str, str] = {
    "assignment.yaml": '''\
# The assignment: what is graded, what each target is worth, what it may not call.
# Keys: torchgrade's docs/authoring.md, "The assignment file: every key". Paths are relative to this file.
title: {title}
reference: reference          # solutions with solution markers (never shown to students)
stubs: exercises              # generated from reference/ by `torchgrade stubs`
checks: graders/checks        # visible/ (students run these) and hidden/ pytest checks
probes: graders/probes        # this course's own probes (scenarios its checks run)
hints: graders/hints.yaml     # hints for failing checks, and words for its probes' facts
time_limit: 10                # seconds per check
chinese_summaries: false      # true: every stub docstring needs a Chinese summary line
# Without a GPU, the CUDA checks run on the CUDA stand-in: score (they count, so a CPU-only grader gives
# a GPU grader's score), warn (findings shown, no points), off (set aside). docs/devices.md in torchgrade.
cuda_standin: score

exercises:
  activations:
    title: Activation functions by hand
    targets:
      relu: {{points: 3, forbidden: [relu, relu_, clamp, clamp_min, maximum, threshold]}}
''',
    "reference/activations.py": '''\
"""Activation functions by hand."""

import torch


def relu(x):
    """Return ``max(x, 0)`` elementwise, as ``torch.relu``: same shape, dtype and device as ``x``.

    Gradients flow back to ``x`` (1 where ``x > 0``, else 0), and ``x`` itself is left unchanged.

    Example::

        >>> relu(torch.tensor([-1.0, 0.5, 2.0]))
        tensor([0.0000, 0.5000, 2.0000])

    Forbidden: relu, relu_, clamp, clamp_min, maximum, threshold.
    """
    # BEGIN SOLUTION
    return x * (x > 0)
    # END SOLUTION
''',
    "graders/checks/visible/test_activations.py": '''\
"""Visible checks for activations.py: students run these with `torchgrade check`."""

import pytest
import torch


@pytest.mark.target("relu")
def test_matches_torch_relu_on_random_input(check, device):
    check(torch.randn(4, 5, generator=check.random(0)).to(device))


@pytest.mark.target("relu")
def test_passes_gradients_back_to_x(check, device):
    x = torch.randn(3, 4, generator=check.random(1), dtype=torch.float64).to(device)
    check(x, probe="call_with_grad")


@pytest.mark.target("relu")
def test_gradient_at_zero_is_zero_as_torch_relu(check, device):
    check(torch.zeros(4, dtype=torch.float64, device=device), probe="call_with_grad")


@pytest.mark.target("relu")
def test_leaves_its_input_unchanged(check, device):
    check(torch.randn(6, generator=check.random(2)).to(device), probe="keeps_input")
''',
    "graders/checks/hidden/test_activations.py": '''\
"""Hidden checks for activations.py: graded, but students see only each check's name and verdict."""

import pytest
import torch


@pytest.mark.target("relu")
def test_keeps_a_non_contiguous_float16_input_in_float16(check, device):
    x = torch.randn(6, 4, generator=check.random(3)).to(device=device, dtype=torch.float16).t()
    check(x)
''',
    "graders/probes/activations.py": '''\
"""This course's own probes: scenarios its checks ask for by name (`check(x, probe="keeps_input")`).

A probe runs once on the reference (trusted) and once on the student's code (in the sandbox) and
returns plain data; the engine compares the two. Call student code only through `target(...)`.
"""

import torch

from torchgrade.engine.probes import Target, probe, tensor


@probe
def keeps_input(target: Target, args: tuple, kwargs: dict) -> dict:
    """The result, and whether the input tensor kept its values through the call."""
    x = args[0]
    before = x.clone()
    out = target(*args, **kwargs)
    return {"value": tensor(out), "input_unchanged": bool(torch.equal(x, before))}
''',
    "graders/hints.yaml": '''\
# Hints end the message of a failing check: one check's (activations.relu::test_name), else the
# target's (activations.relu), else its exercise's, else the engine's; at each, a hint for the fact
# that differed (facts: {key: text}) before one for the kind of failure (kinds: docs/probes.md).
# English, and zh if you like. A hint for a target the course does not have stops every command.
hints:
  activations.relu:
    grad: "the gradient of relu is 1 where x > 0 and 0 elsewhere: build the result from x with tensor operations."
    values: "relu keeps positive values and turns the others into 0; compare with torch.relu on a few numbers."
# Words for the keys this course's own probes report, shown in failure messages.
facts:
  input_unchanged:
    en: whether the input kept its values (the function must not change it in place)
''',
    ".gitignore": "reports/\ndist/\n__pycache__/\n",
}


class ScaffoldError(Exception):
    """The course cannot be written there; the message says why."""


def init_course(folder: Path, title: str = "My course", notebooks: bool = False) -> list[Path]:
    """Write the example course into `folder` (never over an existing file); return the files written.
    With `notebooks`, also the student notebooks (notebooks/<module>.ipynb, torchgrade.notebook)."""
    clashes = [folder / name for name in FILES if (folder / name).exists()]
    if clashes:
        raise ScaffoldError(f"{clashes[0]} exists already; `torchgrade init` writes into a new or empty folder")
    written = []
    try:
        for name, text in FILES.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.format(title=title) if name == "assignment.yaml" else text, encoding="utf-8")
            written.append(path)
    except OSError as e:
        raise ScaffoldError(f"cannot write the course into {folder}: {e.strerror or e}") from None
    written += generate_stubs(folder / "reference", folder / "exercises")
    if notebooks:
        from torchgrade.engine.config import load_assignment
        from torchgrade.authoring.notebooks import generate_notebooks
        written += generate_notebooks(load_assignment(folder / "assignment.yaml"), folder / "notebooks")
    return written
