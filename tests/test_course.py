"""A course is a folder of its own: found from where torchgrade runs, extended by its own probes and
hints, checked for authoring mistakes before grading, and started with `torchgrade init`."""

import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from torchgrade.cli import main
from torchgrade.engine.config import ConfigError, find_assignment, load_assignment
from torchgrade.engine.course import CourseError, check_course, validate_course
from torchgrade.engine.grading import grade_submission
from torchgrade.engine.i18n import set_language
from torchgrade.probes import reference_page
from torchgrade.authoring.scaffold import init_course

from conftest import ROOT, lost_targets


@pytest.fixture
def course(tmp_path):
    """A fresh course from `torchgrade init`, outside this repository."""
    init_course(tmp_path / "course")
    return tmp_path / "course"


@pytest.fixture
def inside(monkeypatch):
    """Run the CLI from inside a folder (the course is found from the current folder upwards)."""
    def enter(folder: Path) -> CliRunner:
        monkeypatch.chdir(folder)
        return CliRunner()
    return enter


# --- finding the course ----------------------------------------------------------------------------

def test_the_course_is_found_in_the_current_folder_or_above_it(course):
    assert find_assignment(course) == course / "assignment.yaml"
    assert find_assignment(course / "graders" / "checks" / "visible") == course / "assignment.yaml"
    assert load_assignment(course).root == course  # a folder names its assignment.yaml


def test_without_a_course_above_every_command_says_where_it_looked_and_how_to_start_one(tmp_path, inside):
    runner = inside(tmp_path)
    for command in (["check"], ["grade", ".", "--out", "out"], ["stubs"], ["bundle"], ["merge", ".", "--out", "merged"]):
        result = runner.invoke(main, command)
        assert result.exit_code == 2, (command, result.output)
        assert f"no assignment.yaml in {tmp_path.resolve()} or any folder above it" in result.output
        assert "torchgrade init" in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_paths_in_the_assignment_file_are_relative_to_it(course, tmp_path, inside):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assignment = load_assignment(course / "assignment.yaml")
    assert assignment.reference_dir == course / "reference"
    assert assignment.probes_dir == course / "graders" / "probes"
    result = inside(elsewhere).invoke(main, ["stubs", "--check", "--assignment", str(course / "assignment.yaml")])
    assert result.exit_code == 0, result.output
    assert f"stubs in {course / 'exercises'} are up to date" in result.output


# --- torchgrade init ----------------------------------------------------------------------------------

def test_init_makes_a_course_whose_reference_scores_full_and_stub_zero(course):
    assignment = load_assignment(course / "assignment.yaml")
    check_course(assignment)
    reference = grade_submission(course / "reference", assignment, device="cpu")
    assert reference.score == reference.max_score == 3, [t.output for t in reference.tests if t.status != "passed"]
    assert {t.visibility for t in reference.tests} == {"visible", "hidden"}
    stub = grade_submission(course / "exercises", assignment, device="cpu")
    assert stub.score == 0 and lost_targets(stub) == {"activations.relu"}


def test_the_courses_own_probe_and_its_words_reach_the_student(course, tmp_path):
    """keeps_input is defined in the course, runs in the sandbox, and its fact is named in words."""
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "activations.py").write_text("def relu(x):\n    x[x < 0] = 0\n    return x\n")
    graded = grade_submission(wrong, load_assignment(course), device="cpu", only=("activations.relu",))
    message = next(t.output for t in graded.tests if "leaves its input unchanged" in t.name)
    assert "whether the input kept its values (the function must not change it in place)" in message
    assert "expected True, got False" in message and "not your fault" not in message


def test_init_writes_nothing_over_an_existing_course(course):
    result = CliRunner().invoke(main, ["init", str(course)])
    assert result.exit_code == 2
    assert "assignment.yaml exists already" in result.output


def test_chinese_summaries_are_off_for_a_new_course_and_on_for_the_bundled_one(course):
    assert not load_assignment(course).chinese_summaries
    assert load_assignment(ROOT).chinese_summaries


def test_a_new_course_says_cuda_standin_and_grades_its_cuda_checks_as_a_gpu_would(course, monkeypatch):
    """`torchgrade init` writes the setting with its comment (a course that says nothing is `off`); on a
    machine without CUDA its reference scores full on the stand-in and its stub zero."""
    monkeypatch.delenv("TORCHGRADE_CUDA_STANDIN", raising=False)
    text = (course / "assignment.yaml").read_text()
    assert "\ncuda_standin: score\n" in text and "# Without a GPU, the CUDA checks run on the CUDA stand-in" in text
    assignment = load_assignment(course)
    assert assignment.cuda_standin == "score"
    reference = grade_submission(course / "reference", assignment, device="all")
    assert reference.score == reference.max_score == 3, [t.output for t in reference.tests if t.status != "passed"]
    stub = grade_submission(course / "exercises", assignment, device="all")
    assert stub.score == 0
    if not torch.cuda.is_available():
        cuda = [t for t in reference.tests if t.device == "cuda"]
        assert cuda and all(t.status == "passed" and t.standin for t in cuda) and reference.standin == "score"


# --- authoring mistakes, before anything is graded -------------------------------------------------

def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


MISTAKES = {
    "target without checks": (
        lambda c: _edit(c / "assignment.yaml", "      relu: {", "      sigmoid: 1\n      relu: {"),
        "target activations.sigmoid (1 points) has no check"),
    "check for a missing target": (
        lambda c: _edit(c / "graders/checks/hidden/test_activations.py", '.target("relu")', '.target("softmax")'),
        "test_keeps_a_non_contiguous_float16_input_in_float16 is marked for target 'softmax', which exercise "
        "'activations' in assignment.yaml does not have (targets: relu)"),
    "misspelt target mark": (
        lambda c: _edit(c / "graders/checks/hidden/test_activations.py", '.target("relu")', '.target("rleu")'),
        "is marked for target 'rleu', which exercise 'activations' in assignment.yaml does not have "
        "(did you mean 'relu'?)"),
    "misspelt check file": (
        lambda c: os.rename(c / "graders/checks/hidden/test_activations.py", c / "graders/checks/hidden/test_activation.py")
        or os.rename(c / "graders/checks/visible/test_activations.py", c / "graders/checks/visible/test_activation.py"),
        "test_activation.py: checks for an exercise 'activation', which neither assignment.yaml nor reference/ has "
        "(did you mean 'activations'?)"),
    "check file for an exercise nobody has": (
        lambda c: (c / "graders/checks/visible/test_embeddings.py").write_text(
            "import pytest\n\n@pytest.mark.target('embed')\ndef test_x(check):\n    check(1)\n"),
        "test_embeddings.py: checks for an exercise 'embeddings', which neither assignment.yaml nor reference/ has"),
    "check file that does not import": (
        lambda c: _edit(c / "graders/checks/visible/test_activations.py", "import pytest\n",
                        "import pytest\nfrom torchgrade.probes import no_such_helper\n"),
        "visible/test_activations.py: this check file cannot be imported: ImportError: cannot import name 'no_such_helper'"),
    "check without a target": (
        lambda c: _edit(c / "graders/checks/hidden/test_activations.py", '@pytest.mark.target("relu")\n', ""),
        "test_keeps_a_non_contiguous_float16_input_in_float16 has no @pytest.mark.target('name')"),
    "unknown probe": (
        lambda c: _edit(c / "graders/checks/visible/test_activations.py", 'probe="keeps_input"', 'probe="keep_input"'),
        "probe 'keep_input' does not exist (did you mean 'keeps_input'?)"),
    "reference without the target": (
        lambda c: _edit(c / "reference/activations.py", "def relu(x):", "def rectify(x):"),
        "reference/activations.py: defines no 'relu', a target of exercise 'activations' in assignment.yaml"),
    "reference module missing": (
        lambda c: os.rename(c / "reference/activations.py", c / "reference/activation.py"),
        "reference/activations.py: no such file: exercise 'activations' has no reference solution "
        "(did you mean 'activation'?)"),
    "unknown target in hints": (
        lambda c: _edit(c / "graders/hints.yaml", "  activations.relu:", "  activations.rlu:"),
        "hints.yaml: hints.activations.rlu: the course has no exercise, target or check of that name "
        "(did you mean 'activations.relu'?)"),
    "missing checks folder": (
        lambda c: _edit(c / "assignment.yaml", "checks: graders/checks", "checks: graders/tests"),
        "graders/tests/visible: no such folder"),
    "probe module that does not import": (
        lambda c: (c / "graders/probes/broken.py").write_text("import torch\nraise ImportError('no such thing')\n"),
        "the course's probes do not import: "),
    "check defined twice": (
        lambda c: _edit(c / "graders/checks/visible/test_activations.py", "def test_leaves_its_input_unchanged",
                        "def test_gradient_at_zero_is_zero_as_torch_relu"),
        "visible/test_activations.py:24: test_gradient_at_zero_is_zero_as_torch_relu is defined twice (lines 19 and "
        "24): Python keeps the second, so the first is never run"),
    "probe named like a built-in": (
        lambda c: (c / "graders/probes/dup.py").write_text(
            "from torchgrade.probes import probe\n\n@probe\ndef call(target, args, kwargs):\n    return 1\n"),
        "probe 'call' in course_probes.dup is already defined in torchgrade.sandbox.probes.basic"),
}


#: The mistakes the pool's `grade -j 2` is tried with: one of each kind its fork server finds (the assignment, a
#: check file, the probes, the reference). It runs the same `course_mistake` as every other command, in a fork
#: of a fork server that imports torch first (seconds each): what the pool adds is the way its line comes back.
POOLED = {"target without checks", "check file that does not import", "probe module that does not import",
          "reference module missing"}


def _every_command(out: Path, pool: bool = True) -> list[list[str]]:
    """Every command that reads a course (the pool's `grade` checks the course in its fork server)."""
    pooled = [["grade", "exercises", "--out", str(out / "graded"), "-j", "2"]] if pool else []
    return [["check", "--path", "reference"], ["grade", "exercises", "--out", str(out / "graded")], *pooled,
            ["stubs"], ["stubs", "--check"], ["bundle", "--out", str(out / "dist"), "--device", "cpu"],
            ["gradescope", "--out", str(out / "dist")], ["audit", "--out", str(out / "audit")]]


@pytest.mark.parametrize("mistake", MISTAKES, ids=list(MISTAKES))
def test_an_authoring_mistake_stops_every_command_with_one_line(mistake, course, tmp_path, inside):
    make, expected = MISTAKES[mistake]
    assert POOLED <= set(MISTAKES)  # (a mistake renamed is not silently left out of the pool's)
    make(course)
    runner = inside(course)
    stubs = sorted((p.name, p.read_bytes()) for p in (course / "exercises").iterdir())
    for command in _every_command(tmp_path / "out", pool=mistake in POOLED):
        result = runner.invoke(main, command)
        assert result.exit_code == 2, (command, result.output)
        assert expected in result.output, (command, result.output)
        assert "not your fault" not in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1, (command, result.output)
    assert not (tmp_path / "out").exists()
    assert sorted((p.name, p.read_bytes()) for p in (course / "exercises").iterdir()) == stubs


def test_an_exercise_the_assignment_leaves_out_is_one_note(course, tmp_path, inside):
    """A module the course has (reference and checks) but this assignment does not grade: allowed, noted."""
    (course / "reference/losses.py").write_text("def mse(a, b):\n    return ((a - b) ** 2).mean()\n")
    (course / "graders/checks/visible/test_losses.py").write_text(
        "import pytest\n\n@pytest.mark.target('mse')\ndef test_x(check):\n    check(1, 2)\n")
    runner = inside(course)
    for command in _every_command(tmp_path / "out"):
        if command[0] in ("stubs", "audit"):
            continue  # (stubs writes exercises/losses.py: a stub per reference module; audit grades mutants)
        result = runner.invoke(main, command)
        assert result.exit_code == 0, (command, result.output)
        notes = [line for line in result.output.splitlines() if line.startswith("torchgrade: note:")]
        assert notes == ["torchgrade: note: exercise 'losses' has checks (test_losses.py) and a reference, but "
                         "assignment.yaml leaves it out: it is not graded"], (command, result.output)


def test_an_assignment_may_grade_a_part_of_the_courses_checks(course, tmp_path):
    """Check files of exercises the assignment does not list (the course has them) are not graded."""
    (course / "reference/losses.py").write_text("def mse(a, b):\n    return ((a - b) ** 2).mean()\n")
    (course / "graders/checks/visible/test_losses.py").write_text(
        "import pytest\n\n@pytest.mark.target('mse')\ndef test_x(check):\n    check(1)\n")
    assignment = load_assignment(course)
    check_course(assignment)
    graded = grade_submission(course / "reference", assignment, device="cpu")
    assert {t.exercise for t in graded.tests} == {"activations"} and graded.score == 3


def test_the_bundled_course_and_the_init_course_pass_the_whole_validation(course):
    """(Their scores are unchanged: tests/test_engine.py and the init test above grade them.)"""
    assert validate_course(load_assignment(ROOT / "assignment.yaml"), collect=True) == []
    assert validate_course(load_assignment(course), collect=True) == []


def test_a_probe_file_error_names_the_file(course):
    (course / "graders/probes/broken.py").write_text("def oops(:\n")
    with pytest.raises(CourseError, match=r"graders/probes/broken.py: SyntaxError"):
        check_course(load_assignment(course))


def test_a_bad_hints_file_is_a_configuration_error(course):
    (course / "graders/hints.yaml").write_text("hints:\n  activations.relu:\n    valuez: nope\n")
    with pytest.raises(ConfigError, match="hints.activations.relu.valuez: unknown failure kind"):
        load_assignment(course)


# --- probes reference, rerun lines -------------------------------------------------------------------

def test_the_probes_reference_page_is_generated_from_the_code():
    """docs/probes.md cannot drift: it is exactly what `torchgrade probes --markdown` prints."""
    page = (ROOT / "docs" / "probes.md").read_text(encoding="utf-8")
    assert page == reference_page(), "docs/probes.md is stale: run `torchgrade probes --markdown > docs/probes.md`"
    for name in ("call", "call_with_grad", "view", "inplace", "module_forward", "module_sgd", "ddp_train"):
        assert f"## `{name}`" in page
    assert "`wrt` (default `(0,)`)" in page and "`state` (default `None`)" in page


def test_the_guides_an_author_has_state_the_fairness_rules_and_cite_no_file_a_course_lacks():
    """The checks guide (copied into every bundle) and docs/authoring.md state the rules themselves; no page
    sends an author to exercises.md or tests/conftest.py, which neither the package nor a new course has;
    the guide says what becomes of a CUDA check without CUDA as the course's cuda_standin says."""
    guide = (ROOT / "graders" / "checks" / "README.md").read_text(encoding="utf-8")
    for text in (guide, (ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")):
        assert "Fairness rules" in text and "One claim per check" in text and "Exception types" in text
        assert "Nothing the contract leaves free is compared" in text
    assert "cuda_standin" in guide and "CUDA stand-in" in guide and "skipped with its reason where CUDA" not in guide
    for page in [ROOT / "graders" / "checks" / "README.md", *(ROOT / "docs").glob("*.md")]:
        text = page.read_text(encoding="utf-8")
        assert "exercises.md" not in text and "tests/conftest.py" not in text, page


def test_torchgrade_probes_lists_the_courses_own_beside_the_built_in_ones(course, inside):
    result = inside(course).invoke(main, ["probes"])
    assert result.exit_code == 0, result.output
    assert "keeps_input()  [course: course_probes.activations]" in result.output
    assert "call_with_grad(wrt=(0,), seed=0)  [built-in]" in result.output


def test_rerun_lines_repeat_the_assignment_when_it_was_named(course, tmp_path, inside):
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "activations.py").write_text("def relu(x):\n    return x\n")
    runner = inside(tmp_path)
    yaml = str(course / "assignment.yaml")
    result = runner.invoke(main, ["check", "--path", str(wrong), "--assignment", yaml, "--report", str(tmp_path / "r")])
    assert f"--assignment {yaml}" in result.output
    found = inside(course).invoke(main, ["check", "--path", str(wrong), "--report", str(tmp_path / "r")])
    assert "rerun: torchgrade check activations.relu::" in found.output and "--assignment" not in found.output


def test_the_report_goes_to_the_course_folder_by_default(course, inside):
    result = inside(course / "graders").invoke(main, ["check", "--path", str(course / "reference")])
    assert (course / "reports" / "check" / "report.html").is_file(), result.output
    assert not (course / "graders" / "reports").exists()


def test_a_course_without_probes_or_hints_needs_neither(tmp_path):
    """probes: and hints: point at optional parts: a course may have none."""
    init_course(tmp_path / "c")
    for part in ("graders/probes/activations.py", "graders/hints.yaml"):
        os.remove(tmp_path / "c" / part)
    _edit(tmp_path / "c" / "graders/checks/visible/test_activations.py", 'probe="keeps_input"', 'probe="call"')
    assignment = load_assignment(tmp_path / "c")
    check_course(assignment)
    graded = grade_submission(tmp_path / "c" / "reference", assignment, device="cpu")
    assert graded.score == graded.max_score == 3, [t.output for t in graded.tests if t.status != "passed"]


def test_a_missing_module_is_one_line_not_a_failure_and_rerun_per_check(course, tmp_path, inside):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("I forgot to copy my work in\n")
    result = inside(course).invoke(main, ["check", "--path", str(empty), "--report", str(tmp_path / "r")])
    assert result.exit_code == 1, result.output
    line = "activations.py is missing: its 3 points are not graded"
    assert result.output.count(line) == 1 and "rerun:" not in result.output, result.output
    assert "not your fault" not in result.output
    report = (tmp_path / "r" / "report.html").read_text()
    assert report.count(line) == 1, report.count(line)
    try:
        zh = inside(course).invoke(main, ["check", "--path", str(empty), "--lang", "zh", "--report", str(tmp_path / "z")])
    finally:
        set_language(None)  # --lang is chosen once per process: the next test in this one reads English
    assert zh.output.count("缺少 activations.py：它的 3 分没有评测") == 1 and "重新运行" not in zh.output, zh.output


def test_a_hint_for_a_check_must_name_one_that_exists(course):
    hints = course / "graders/hints.yaml"
    hints.write_text(hints.read_text().replace(
        "hints:\n", "hints:\n  activations.relu::test_matches_torch_relu_on_random_inputs:\n    values: one check\n"))
    with pytest.raises(CourseError, match=r"hints.activations.relu::test_matches_torch_relu_on_random_inputs: the "
                                          r"course has no exercise, target or check of that name \(did you mean "
                                          r"'activations.relu::test_matches_torch_relu_on_random_input'\?\)"):
        validate_course(load_assignment(course), collect=False)
    hints.write_text(hints.read_text().replace("random_inputs:", "random_input:"))
    assert validate_course(load_assignment(course), collect=False) == []


def test_a_hint_naming_a_check_that_a_second_definition_shadows_is_refused(course):
    """The hint would be accepted (a check of that name exists: the second), while the check it was written
    for never runs: the file is refused, with both lines, in a class as at the top level."""
    checks = course / "graders/checks/visible/test_activations.py"
    hints = course / "graders/hints.yaml"
    hints.write_text(hints.read_text().replace(
        "hints:\n", "hints:\n  activations.relu::test_passes_gradients_back_to_x:\n    values: the first one\n"))
    checks.write_text(checks.read_text() + "\n\nclass TestMore:\n    def test_a(self):\n        pass\n\n"
                      "    def test_a(self):\n        pass\n")
    with pytest.raises(CourseError, match=r"test_activations.py:\d+: TestMore.test_a is defined twice \(lines \d+ and"):
        validate_course(load_assignment(course), collect=False)
    checks.write_text(checks.read_text().split("\n\nclass TestMore")[0].replace(
        "def test_matches_torch_relu_on_random_input", "def test_passes_gradients_back_to_x"))
    with pytest.raises(CourseError, match=r"test_activations.py:13: test_passes_gradients_back_to_x is defined twice "
                                          r"\(lines 8 and 13\)"):
        validate_course(load_assignment(course), collect=False)


def test_a_misspelt_target_on_the_command_line_gets_a_did_you_mean(course, inside):
    result = inside(course).invoke(main, ["check", "activations.rleu", "--path", "reference"])
    assert result.exit_code == 2
    assert result.output.strip() == ("torchgrade: error: unknown exercise or target 'activations.rleu' "
                                     "(did you mean 'activations.relu'?)"), result.output
