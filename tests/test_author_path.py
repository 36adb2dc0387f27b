"""A course author's path: what a check says when the student's code did something the check did not
foresee (a class that should have refused its arguments, a Function whose backward alone is unfinished),
or when the course itself slipped (a probe name built at run time), in English and Chinese; and hints
per check and per fact. The course is written in a temporary folder outside the repository."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchgrade.engine.config import load_assignment
from torchgrade.engine.grading import grade_submission
from torchgrade.engine.i18n import set_language

ASSIGNMENT = """\
title: Blocks
exercises:
  blocks:
    targets: {Split: 2, GELUFunction: 2, scale: 2}
"""
REFERENCE = '''\
import torch


class Split(torch.nn.Module):
    """Split a feature dimension into heads."""

    def __init__(self, dim, heads):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads = heads

    def forward(self, x):
        return x.reshape(*x.shape[:-1], self.heads, -1)


class GELUFunction(torch.autograd.Function):
    """tanh-free GELU with a hand-written backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(1.702 * x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(1.702 * x)
        return grad * (s + 1.702 * x * s * (1 - s))


def scale(x):
    return {"doubled": 2 * x, "tripled": 3 * x}
'''
CHECKS = '''\
import pytest
import torch


@pytest.mark.target("Split")
def test_refuses_heads_that_do_not_divide_the_dimension(check):
    check(6, 4)


@pytest.mark.target("Split")
def test_splits_the_last_dimension(check):
    check(6, 2, probe="module_forward", options={"inputs": (torch.arange(12.0).reshape(2, 6),)})


@pytest.mark.target("GELUFunction")
def test_gradient_of_the_function(check):
    check(torch.linspace(-3, 3, 7, dtype=torch.float64), probe="function_grad")


@pytest.mark.target("scale")
def test_scales(check):
    check(torch.arange(3.0))


@pytest.mark.target("scale")
def test_scales_through_a_probe_named_at_run_time(check):
    kind = "fwd"
    check(torch.arange(3.0), probe="module_" + kind)
'''
PROBES = '''\
from torchgrade.probes import probe, tensor


@probe
def function_grad(target, args, kwargs):
    """Apply the Function (its `apply`, through the watch) and backpropagate ones."""
    x = args[0].detach().requires_grad_(True)
    out = target.run(target.obj.apply, x)
    target.run(out.sum().backward)
    return {"value": tensor(out), "grad": x.grad}
'''
HINTS = """\
hints:
  blocks.scale:
    values: "a hint for the target"
    facts:
      tripled: "the tripled entry is 3 * x"
  blocks.scale::test_scales:
    values: "a hint for this check only"
"""


@pytest.fixture
def course(tmp_path) -> Path:
    root = tmp_path / "course"
    for path, text in {"assignment.yaml": ASSIGNMENT, "reference/blocks.py": REFERENCE,
                       "graders/checks/visible/test_blocks.py": CHECKS, "graders/probes/functions.py": PROBES,
                       "graders/hints.yaml": HINTS}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _grade(course: Path, tmp_path: Path, source: str, lang: str = "en") -> dict[str, str]:
    submission = tmp_path / f"submission-{lang}"
    submission.mkdir(parents=True, exist_ok=True)
    (submission / "blocks.py").write_text(textwrap.dedent(source))
    set_language(lang)
    try:
        grade = grade_submission(submission, load_assignment(course), device="cpu")
    finally:
        set_language(None)
    return {t.name.split(": ", 1)[1].removesuffix(" [cpu]"): t.output for t in grade.tests}


WRONG = REFERENCE.replace('''        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
''', "").replace('''        (x,) = ctx.saved_tensors
        s = torch.sigmoid(1.702 * x)
        return grad * (s + 1.702 * x * s * (1 - s))''', '''        raise NotImplementedError("GELUFunction.backward: not implemented yet")''').replace(
    '"tripled": 3 * x', '"tripled": 4 * x')


def test_each_message_says_what_the_code_did_and_what_was_expected(course, tmp_path):
    out = _grade(course, tmp_path, WRONG)
    split = out["refuses heads that do not divide the dimension"]
    assert "called: Split(6, 4)" in split
    assert "expected ValueError to be raised (dim 6 is not divisible by heads 4), but the call returned a Split" \
        in split, split
    assert "ProbeError" not in split and "plain data" not in split
    gelu = out["gradient of the function"]
    assert gelu.startswith("GELUFunction.backward is not implemented yet (it raises NotImplementedError)"), gelu
    runtime = out["scales through a probe named at run time"]
    assert runtime.startswith("grader error (not your fault; please report it): this check asks for the probe "
                              "'module_fwd', which neither torchgrade nor the course defines (did you mean "
                              "'module_forward'?)"), runtime
    assert "KeyError" not in runtime


def test_the_same_messages_in_chinese(course, tmp_path):
    out = _grade(course, tmp_path, WRONG, "zh")
    assert "应当抛出 ValueError（dim 6 is not divisible by heads 4），但调用返回了 Split 类型的值" in \
        out["refuses heads that do not divide the dimension"]
    assert out["gradient of the function"].startswith("GELUFunction.backward 还没有实现（它抛出了 NotImplementedError）")
    assert "探针 'module_fwd' 既不是 torchgrade 内置的，也不是课程定义的（是否应为 'module_forward'？）" in \
        out["scales through a probe named at run time"]


def test_a_function_is_called_through_apply_in_the_message(course, tmp_path):
    wrong_forward = REFERENCE.replace("return x * torch.sigmoid(1.702 * x)", "return x * torch.sigmoid(x)")
    gelu = _grade(course, tmp_path, wrong_forward)["gradient of the function"]
    assert "called: GELUFunction.apply(float64 tensor of shape (7,)" in gelu, gelu


def test_a_module_forward_failure_shows_the_inputs_of_the_forward_call(course, tmp_path):
    swapped = REFERENCE.replace("x.reshape(*x.shape[:-1], self.heads, -1)", "x.reshape(*x.shape[:-1], -1, self.heads)")
    split = _grade(course, tmp_path, swapped)["splits the last dimension"]
    assert "called: Split(6, 2)(float32 tensor of shape (2, 6) = [[0., 1., 2., 3., 4., 5.], [6., 7., 8., 9., 10., 11.]])" \
        in split, split


def test_hints_per_check_and_per_fact(course, tmp_path):
    out = _grade(course, tmp_path, WRONG)
    assert out["scales"].endswith("hint: a hint for this check only"), out["scales"]
    other = REFERENCE.replace('"doubled": 2 * x', '"doubled": 5 * x')
    assert _grade(course, tmp_path / "b", other)["scales"].endswith("hint: a hint for this check only")
    set_language(None)


def test_a_fact_hint_wins_over_the_targets_kind_hint(course, tmp_path):
    (course / "graders/hints.yaml").write_text(HINTS.replace(
        '  blocks.scale::test_scales:\n    values: "a hint for this check only"\n', ""))
    tripled = _grade(course, tmp_path, WRONG)["scales"]
    assert tripled.endswith("hint: the tripled entry is 3 * x"), tripled
    doubled = _grade(course, tmp_path / "b", REFERENCE.replace('"doubled": 2 * x', '"doubled": 5 * x'))["scales"]
    assert doubled.endswith("hint: a hint for the target"), doubled
