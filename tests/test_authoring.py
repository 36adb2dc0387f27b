"""Authoring: stubs generated from the reference stay in sync, teach in two languages, and the guide works."""

import re
import shutil
import textwrap

import pytest
from click.testing import CliRunner

from torchgrade.authoring import MarkerError, docstring_problems, generate_stubs, make_stub
from torchgrade.cli import main
from torchgrade.config import load_assignment
from torchgrade.grading import grade_submission

from conftest import ROOT, lost_targets


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


# --- the guide (docs/authoring.md), followed literally ----------------------------------------

GUIDE = ROOT / "docs" / "authoring.md"
_BLOCK = re.compile(r"<!-- file: (?P<path>\S+) -->\s*```\w*\n(?P<code>.*?)```", re.DOTALL)


def guide_files() -> dict[str, str]:
    """The files the guide tells an author to write, by path."""
    return {m["path"]: m["code"] for m in _BLOCK.finditer(GUIDE.read_text(encoding="utf-8"))}


def test_the_guide_names_every_piece_of_an_exercise():
    assert set(guide_files()) == {"reference/activations.py", "assignment.yaml",
                                  "graders/checks/visible/test_activations.py",
                                  "graders/checks/hidden/test_activations.py"}


@pytest.fixture
def guide_course(tmp_path):
    """A fresh course holding only what the guide says to write, around a copy of this course's skeleton.

    Its checks folder gets a name of its own: checks are imported as packages (checks/visible/...),
    and this process has imported the real course's already.
    """
    files = guide_files()
    entry = files.pop("assignment.yaml")
    checks = f"checks_{tmp_path.name}"
    for path, code in files.items():
        path = tmp_path / path.replace("graders/checks/", f"{checks}/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    (tmp_path / "assignment.yaml").write_text(
        f"title: Guide\nreference: reference\nchecks: {checks}\nstubs: exercises\nexercises:\n" + entry)
    assert generate_stubs(tmp_path / "reference", tmp_path / "exercises") == [tmp_path / "exercises" / "activations.py"]
    return tmp_path


def test_the_guides_example_grades_full_for_its_reference_and_zero_for_its_stub(guide_course, tmp_path):
    assignment = load_assignment(guide_course / "assignment.yaml")
    assert [t.qualname for t in assignment.targets] == ["activations.relu"]
    stub = (guide_course / "exercises" / "activations.py").read_text()
    assert "_positive" not in stub and "torch.where" not in stub and "逐元素计算" in stub
    assert docstring_problems(stub, "activations.py") == []

    reference = grade_submission(guide_course / "reference", assignment, device="cpu")
    assert reference.max_score == 2
    assert reference.score == 2, "\n".join(t.output for t in reference.tests if t.status != "passed")
    assert {t.visibility for t in reference.tests} == {"visible", "hidden"}

    stubs = grade_submission(guide_course / "exercises", assignment, device="cpu")
    assert stubs.score == 0 and lost_targets(stubs) == {"activations.relu"}

    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "activations.py").write_text(textwrap.dedent("""
        import torch

        def relu(x):
            return x.clamp(min=0)
    """))
    graded = grade_submission(wrong, assignment, device="cpu")
    assert graded.score == 0
    assert all(t.output.startswith("forbidden call: relu may not use `clamp`") for t in graded.tests
               if t.status == "failed")


def test_the_guides_bundle_command_verifies_the_reference_and_packs_only_public_files(guide_course):
    assignment = guide_course / "assignment.yaml"
    result = CliRunner().invoke(main, ["bundle", "--out", str(guide_course / "dist"), "--device", "cpu", "--verify",
                                       "--assignment", str(assignment)])
    assert result.exit_code == 0, result.output
    assert "recorded expected outcomes on cpu: activations 2" in result.output
    folder = guide_course / "dist" / "student"
    assert (guide_course / "dist" / "student.zip").is_file()
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"exercises/activations.py", "expected/activations.pt", "assignment.yaml", "README.md"} <= files
    assert f"checks_{guide_course.name}/visible/test_activations.py" in files
    assert not [f for f in files if "hidden" in f or f.startswith("reference")]

    reference = guide_course / "reference" / "activations.py"  # now it breaks its own rule: clamp is forbidden
    reference.write_text(reference.read_text().replace("torch.where(_positive(x), x, torch.zeros_like(x))",
                                                       "x.clamp(min=0)"))
    result = CliRunner().invoke(main, ["bundle", "--out", str(guide_course / "dist"), "--device", "cpu", "--verify",
                                       "--assignment", str(assignment)])
    assert result.exit_code == 2
    assert "the reference fails 2 of its own visible checks" in result.output
    assert "forbidden call: relu may not use `clamp`" in result.output
