"""Authoring: stubs generated from the reference stay in sync and teach in two languages (the guide: test_install.py)."""

import re

import pytest
from click.testing import CliRunner

from torchgrade.authoring.stubs import MarkerError, docstring_problems, generate_stubs, make_stub
from torchgrade.cli import main

from conftest import ROOT


def test_exercises_are_exactly_what_the_stub_generator_makes():
    """CI's sync check: `torchgrade stubs --check` would find nothing to do."""
    assert generate_stubs(ROOT / "reference", ROOT / "exercises", write=False) == [], \
        "exercises/ is out of date: run `torchgrade stubs`"


@pytest.mark.parametrize("path", sorted((ROOT / "exercises").glob("*.py")), ids=lambda p: p.name)
def test_every_stub_docstring_carries_a_chinese_summary(path):
    assert docstring_problems(path.read_text(encoding="utf-8"), path.name) == []


REFERENCE = '''\
"""A module.

(一个模块。)
"""

import torch

# BEGIN REMOVE
def _helper(x):
    return x + 1
# END REMOVE


def f(x):
    """Add one.

    加一。
    """
    # BEGIN SOLUTION
    return _helper(x)
    # END SOLUTION


class Op(torch.autograd.Function):
    """An op.

    一个算子。
    """

    @staticmethod
    def forward(ctx, x):
        # BEGIN SOLUTION
        return x
        # END SOLUTION
    # BEGIN REMOVE

    def _private(self):
        pass
    # END REMOVE

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION
        return g
        # END SOLUTION
# BEGIN REMOVE


def _tail():
    pass
# END REMOVE
'''

STUB = '''\
"""A module.

(一个模块。)
"""

import torch


def f(x):
    """Add one.

    加一。
    """
    raise NotImplementedError("f: not implemented yet")


class Op(torch.autograd.Function):
    """An op.

    一个算子。
    """

    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("Op.forward: not implemented yet")

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError("Op.backward: not implemented yet")
'''


def test_a_stub_keeps_the_teaching_text_and_drops_solutions_helpers_and_their_blank_lines():
    assert make_stub(REFERENCE) == STUB


@pytest.mark.parametrize("source, line, words", [
    ("def f():\n    # BEGIN SOLUTION\n    return 1\n", 2, "has no matching '# END SOLUTION'"),
    ("def f():\n    return 1\n    # END SOLUTION\n", 3, "without a matching begin marker"),
    ("# BEGIN REMOVE\nx = 1\n# END SOLUTION\n", 1, "has no matching '# END REMOVE'"),
])
def test_unpaired_markers_are_refused_with_the_line(source, line, words):
    with pytest.raises(MarkerError, match=rf"ref\.py line {line}: .*{re.escape(words)}"):
        make_stub(source, "ref.py")


def test_a_docstring_without_a_chinese_line_is_reported():
    source = '"""A module.\n\n(模块。)\n"""\n\n\ndef f():\n    """Only English."""\n\n\ndef _private():\n    pass\n'
    assert docstring_problems(source, "m.py") == ["m.py line 7: f's docstring has no Chinese summary line"]


def _course(tmp_path, reference: str, stub: str | None, settings: str = "") -> tuple:
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "m.py").write_text(reference)
    if stub is not None:
        (tmp_path / "exercises").mkdir()
        (tmp_path / "exercises" / "m.py").write_text(stub)
    (tmp_path / "checks" / "visible").mkdir(parents=True)  # (a course whose target has no check is refused)
    (tmp_path / "checks" / "visible" / "test_m.py").write_text(
        "import pytest\n\n\n@pytest.mark.target('f')\ndef test_f(check):\n    check(1)\n")
    path = tmp_path / "assignment.yaml"
    path.write_text(f"reference: reference\nchecks: checks\nstubs: exercises\n{settings}exercises:\n  m:\n    targets:\n      f: 1\n")
    return path


def test_stubs_check_fails_when_out_of_date_and_the_command_fixes_it(tmp_path):
    assignment = _course(tmp_path, REFERENCE, stub="old\n")
    runner = CliRunner()
    result = runner.invoke(main, ["stubs", "--check", "--assignment", str(assignment)])
    assert result.exit_code == 1
    assert f"out of date: {tmp_path / 'exercises' / 'm.py'}" in result.output
    assert (tmp_path / "exercises" / "m.py").read_text() == "old\n"  # --check changes nothing
    result = runner.invoke(main, ["stubs", "--assignment", str(assignment)])
    assert result.exit_code == 0 and (tmp_path / "exercises" / "m.py").read_text() == STUB
    result = runner.invoke(main, ["stubs", "--check", "--assignment", str(assignment)])
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output


def test_stubs_check_fails_on_a_docstring_without_chinese(tmp_path):
    reference = REFERENCE.replace("    加一。\n", "")
    assignment = _course(tmp_path, reference, stub=make_stub(reference), settings="chinese_summaries: true\n")
    result = CliRunner().invoke(main, ["stubs", "--check", "--assignment", str(assignment)])
    assert result.exit_code == 1
    assert "f's docstring has no Chinese summary line" in result.output


def test_chinese_summaries_are_a_course_setting_off_by_default(tmp_path):
    reference = REFERENCE.replace("    加一。\n", "")
    assignment = _course(tmp_path, reference, stub=make_stub(reference))
    result = CliRunner().invoke(main, ["stubs", "--check", "--assignment", str(assignment)])
    assert result.exit_code == 0, result.output
    assert "Chinese" not in result.output
