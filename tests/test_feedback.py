"""Feedback for a stuck student: messages with the call, the input and a hint; a rerun command that works;
-x; English or Chinese; hidden checks by name and verdict only."""

import json
import re
import shlex
import string

import click
import pytest
import torch
from click.testing import CliRunner

from torchgrade.engine import i18n
from torchgrade.outputs import terminal
from torchgrade.engine.grading import CHECKS_INI
from torchgrade.cli import main
from torchgrade.engine.differential import (GraderError, recording, reference_outcome, request_key, save_recording)
from torchgrade.outputs.feedback import build, rerun_command, split_hint
from torchgrade.engine.hints import HINTS, KINDS
from torchgrade.outputs.report import render_report
from torchgrade.engine.scoring import CheckResult, Grade

from conftest import ROOT, failures, make_submission, small_course


@pytest.fixture(autouse=True)
def english():
    i18n.set_language(None)
    yield
    i18n.set_language(None)


# --- messages ---------------------------------------------------------------------------------

def test_a_failure_names_the_call_its_input_what_differs_and_a_hint(grade):
    g = grade(only=("tensors.one_hot",), append={"tensors": """
        def one_hot(labels, num_classes):
            out = torch.zeros(labels.shape[0], num_classes)
            out[torch.arange(labels.shape[0]), labels] = 1
            return out
    """})
    message = failures(g, "tensors.one_hot")[0]
    assert message.splitlines() == [
        "called: one_hot(int64 tensor of shape (4,) = [0, 2, 1, 2], 3)",
        "the result has the wrong dtype: expected torch.int64, got torch.float32",
        "hint: one_hot returns int64 (torch.long): start from torch.zeros(..., dtype=torch.long).",
    ]


def test_an_exception_shows_only_the_students_own_frames(grade):
    g = grade(only=("tensors.gather",), append={"tensors": """
        def _index_of(dim):
            raise ValueError(f"no gather along {dim}")

        def gather(x, dim, index):
            return _index_of(dim)
    """})
    message = failures(g, "tensors.gather")[0]
    assert "your code raised ValueError: no gather along 1" in message
    trace = message.split("where your code raised it:\n", 1)[1]
    assert re.fullmatch(r'  File "tensors.py", line \d+, in gather\n    return _index_of\(dim\)\n'
                        r'  File "tensors.py", line \d+, in _index_of\n    raise ValueError\(f"no gather along \{dim\}"\)',
                        trace), trace


def test_the_seed_of_random_inputs_is_named(grade):
    g = grade(only=("tensors.view",), append={"tensors": """
        def view(x, *shape):
            return x.as_strided((x.numel(),), (1,))
    """})
    assert any("[inputs from seed 1]" in m and "called: view(float32 tensor of shape (2, 3, 4), -1, 4)" in m
               for m in failures(g, "tensors.view"))


def test_split_hint_separates_the_hint_in_either_language():
    assert split_hint("called: f(1)\nthe result: expected 1, got 2\nhint: try again") == \
        ("called: f(1)\nthe result: expected 1, got 2", "try again")
    assert split_hint("调用：f(1)\n提示：再试一次") == ("调用：f(1)", "再试一次")
    assert split_hint("no hint here") == ("no hint here", "")


# --- the check command ------------------------------------------------------------------------

@pytest.fixture
def small_assignment(tmp_path):
    return small_course(tmp_path, {"tensors": {"view": 4, "broadcast_shape": 2, "one_hot": 3}})


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_the_rerun_command_a_failure_prints_runs_exactly_that_check(tmp_path, small_assignment):
    submission = make_submission(tmp_path / "sub", append={"tensors": """
        def view(x, *shape):
            return x.as_strided((x.numel(),), (1,))
    """})
    result = run("check", "tensors.view", "tensors.one_hot", "--path", submission, "--device", "cpu",
                 "--report", tmp_path / "r1", "--assignment", small_assignment)
    assert result.exit_code == 1, result.output  # checks failed
    reruns = re.findall(r"^ +rerun: (.*)$", result.output, re.MULTILINE)
    assert reruns == [f"torchgrade check tensors.view::test_matches_tensor_view_on_a_contiguous_input --device cpu "
                      f"--path {submission} --assignment {small_assignment}"]
    failed = [t for t in json.loads((tmp_path / "r1" / "results.json").read_text())["tests"]
              if t["extra_data"]["target"] == "view" and t["status"] == "failed"]
    assert len(failed) > 1 and f"... and {len(failed) - 1} more failing checks of tensors.view" in result.output
    words = shlex.split(reruns[0])[1:]  # without "torchgrade"
    again = run(*words, "--report", tmp_path / "r2")  # the line names the assignment it was graded with
    assert again.exit_code == 1, again.output
    tests = json.loads((tmp_path / "r2" / "results.json").read_text())["tests"]
    assert [(t["name"], t["status"]) for t in tests] == [
        ("tensors.view: matches tensor view on a contiguous input [cpu]", "failed")]


def test_check_rejects_a_check_name_without_a_target(small_assignment):
    result = run("check", "tensors.veiw::test_x", "--assignment", small_assignment)
    assert result.exit_code == 2 and "unknown exercise or target 'tensors.veiw::test_x'" in result.output


def test_exitfirst_stops_at_the_first_failing_check(tmp_path, small_assignment):
    result = run("check", "-x", "--path", ROOT / "exercises", "--device", "cpu", "--report", tmp_path / "r",
                 "--assignment", small_assignment)
    assert result.exit_code == 1, result.output
    tests = json.loads((tmp_path / "r" / "results.json").read_text())["tests"]
    assert [t["status"] for t in tests] == ["failed"]


def test_check_speaks_chinese_on_request(tmp_path, small_assignment):
    result = run("check", "tensors.one_hot", "--lang", "zh", "--path", ROOT / "exercises", "--device", "cpu",
                 "--report", tmp_path / "r", "--assignment", small_assignment)
    assert result.exit_code == 1, result.output
    assert "one_hot 还没有实现（它抛出了 NotImplementedError）" in result.output
    assert "得分：0 / 3（0%）" in result.output
    report = (tmp_path / "r" / "report.html").read_text()
    assert '<html lang="zh">' in report and "尚未实现" in report


def test_the_terminal_table_has_a_line_per_target_and_no_colour_when_not_a_terminal(tmp_path, small_assignment):
    result = run("check", "tensors.view", "tensors.broadcast_shape", "tensors.one_hot", "--path", ROOT / "reference",
                 "--device", "cpu", "--report", tmp_path / "r", "--assignment", small_assignment)
    assert "\x1b[" not in result.output
    assert re.search(r"^✓ tensors\.py +█{10} +9 / 9 ", result.output, re.MULTILINE), result.output
    assert "score: 9 / 9 (100%)" in result.output
    assert "checks skipped: not graded on cuda: --device cpu was chosen" in result.output
    assert result.exit_code == 0, result.output  # every graded check passed; set-aside ones do not count


def test_under_lang_zh_every_line_check_prints_is_chinese(tmp_path, small_assignment):
    """The skip notice and the exit-status line too (they stayed English once)."""
    result = run("check", "tensors.one_hot", "--lang", "zh", "--path", ROOT / "exercises", "--device", "cpu",
                 "--report", tmp_path / "r", "--assignment", small_assignment)
    assert result.exit_code == 1
    assert "未在 cuda 上评测：选择了 --device cpu" in result.output
    assert "项计分检查没有通过（退出状态 1）" in result.output
    for line in result.output.splitlines():
        words = re.sub(r"--?[a-z]+|torchgrade|NotImplementedError|one_hot|tensors(\.py)?|cuda|cpu|report\.html"
                       r"|[\w./-]*/[\w./-]*|\w+::\w+", "", line)
        assert not re.search(r"[A-Za-z]{4,}", words), line  # nothing left in English


def test_the_plugin_takes_the_language_too(tmp_path, small_assignment):
    """`pytest -c graders/checks/pytest.ini --lang zh` (the plain way of grading) speaks Chinese as well."""
    results = tmp_path / "results.json"
    code = pytest.main([str(ROOT / "graders" / "checks" / "visible"), "-c", str(CHECKS_INI),
                        "--rootdir", str(ROOT / "graders" / "checks"), "--assignment", str(small_assignment),
                        "--submission", str(ROOT / "exercises"), "--device", "cpu", "--target", "tensors.one_hot",
                        "--lang", "zh", "--results-json", str(results), "-q", "-p", "no:cacheprovider"])
    assert code == pytest.ExitCode.TESTS_FAILED
    outputs = [t["output"] for t in json.loads(results.read_text())["tests"] if t["status"] == "failed"]
    assert outputs and set(outputs) == {"one_hot 还没有实现（它抛出了 NotImplementedError）"}


def test_the_plain_way_shows_each_failed_checks_message_not_a_python_traceback(tmp_path, small_assignment, capsys):
    code = pytest.main([str(ROOT / "graders" / "checks" / "visible"), "-c", str(CHECKS_INI),
                        "--rootdir", str(ROOT / "graders" / "checks"), "--assignment", str(small_assignment),
                        "--submission", str(ROOT / "exercises"), "--device", "cpu", "--target", "tensors.one_hot",
                        "-p", "no:cacheprovider"])
    assert code == pytest.ExitCode.TESTS_FAILED
    out = capsys.readouterr().out
    assert "one_hot is not implemented yet (it raises NotImplementedError)" in out
    assert "Traceback" not in out and "differential.py" not in out and "def test_" not in out


# --- the catalogues ---------------------------------------------------------------------------

def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("key", sorted(i18n.MESSAGES))
def test_every_message_exists_in_both_languages_with_the_same_placeholders(key):
    entry = i18n.MESSAGES[key]
    assert set(entry) == set(i18n.LANGUAGES)
    assert _fields(entry["en"]) == _fields(entry["zh"])


def test_every_hint_is_written_in_both_languages_for_a_known_kind():
    for (where, kind), entry in HINTS.items():
        assert kind in KINDS, (where, kind)
        assert set(entry) == set(i18n.LANGUAGES) and all(entry.values()), (where, kind)
        assert re.search(r"[\u4e00-\u9fff]", entry["zh"]), (where, kind)


def test_the_language_comes_from_the_environment_unless_set(monkeypatch):
    monkeypatch.setenv("TORCHGRADE_LANG", "zh_CN.UTF-8")
    assert i18n.language() == "zh"
    i18n.set_language("en")
    assert i18n.language() == "en"
    with pytest.raises(ValueError):
        i18n.set_language("fr")


# --- hidden checks and the rerun selector -----------------------------------------------------

def _result(name, status, visibility="visible", output="", device="cpu", nodeid=None, score=0.0, max_score=1.0):
    exercise, rest = name.split(".", 1)
    target = rest.split(":")[0]
    return CheckResult(nodeid=nodeid or f"visible/test_{exercise}.py::test_x[{device}]", name=name, exercise=exercise,
                       target=target, device=device, visibility=visibility, status=status, output=output,
                       score=score, max_score=max_score)


@pytest.fixture
def mixed_grade():
    return Grade(submission="alice", devices=["cpu"], tests=[
        _result("tensors.view: matches on a contiguous input [cpu]", "passed", score=1.0),
        _result("tensors.view: matches on a transposed input [cpu]", "failed", "hidden",
                output="called: view(SECRET-INPUT)\nthe result: expected 1, got 2\nhint: SECRET-HINT"),
        _result("tensors.one_hot: encodes labels [cpu]", "failed",
                output="called: one_hot(VISIBLE-INPUT)\nthe result: expected 1, got 2\nhint: VISIBLE-HINT"),
    ])


def test_a_hidden_checks_duration_and_skip_reason_stay_in_the_instructors_copy(assignment):
    """A stub that sleeps in proportion to a property of its input would read the input back from the
    duration; a skip reason may quote the input."""
    from torchgrade.engine.results import results_document

    grade = Grade(submission="alice", devices=["cpu"], tests=[
        _result("tensors.view: matches on a contiguous input [cpu]", "passed", score=1.0),
        _result("tensors.view: matches on a transposed input [cpu]", "passed", "hidden", score=1.0),
        _result("tensors.view: matches on a strided input [cuda]", "skipped", "hidden", device="cuda",
                output="set aside: SECRET-INPUT"),
    ])
    grade.tests[0].duration, grade.tests[1].duration, grade.tests[2].duration = 0.25, 3.7, 1.5
    student = results_document(grade, assignment)
    tests = {t["name"]: t["extra_data"] for t in student["tests"]}
    assert tests["tensors.view: matches on a contiguous input [cpu]"]["duration"] == 0.25
    assert "duration" not in tests["tensors.view: matches on a transposed input [cpu]"]
    assert "SECRET" not in json.dumps(student) and "SECRET" not in render_report(grade, assignment)
    assert "3.7" not in json.dumps(student) and "1.5" not in json.dumps(student)
    teacher = results_document(grade, assignment, instructor=True)
    assert "SECRET-INPUT" in json.dumps(teacher) and "3.7" in json.dumps(teacher)


def test_hidden_checks_show_name_and_verdict_only_except_to_an_instructor(mixed_grade, assignment):
    page = render_report(mixed_grade, assignment)
    assert "matches on a transposed input" in page
    assert "SECRET" not in page
    assert "VISIBLE-INPUT" in page and "VISIBLE-HINT" in page
    teacher = render_report(mixed_grade, assignment, instructor=True)
    assert "SECRET-INPUT" in teacher and "SECRET-HINT" in teacher
    view = build(mixed_grade, assignment)
    hidden = [c for e in view.exercises for t in e.targets for c in t.checks if c.hidden]
    assert [(c.message, c.hint, c.rerun) for c in hidden] == [("", "", None)]


def test_student_output_is_escaped_in_the_report(assignment):
    grade = Grade(submission="<b>mallory</b>", devices=["cpu"], tests=[
        _result("tensors.view: x [cpu]", "failed", output="<script>alert(1)</script>")],
        output="graded on: cpu\n--- printed by tensors.view ---\n<img src=x onerror=alert(2)>")
    page = render_report(grade, assignment)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "<b>mallory" not in page


@pytest.mark.parametrize("nodeid, device, command", [
    ("visible/test_tensors.py::test_x[cpu]", "cpu", "torchgrade check tensors.view::test_x --device cpu"),
    ("visible/test_tensors.py::test_x", None, "torchgrade check tensors.view::test_x"),
    ("visible/test_tensors.py::test_x[cpu-2x3]", "cpu", "torchgrade check 'tensors.view::test_x[cpu-2x3]' --device cpu"),
])
def test_rerun_command(nodeid, device, command):
    result = _result("tensors.view: x", "failed", nodeid=nodeid, device=device)
    assert rerun_command(result) == command


def _notebook_grade() -> Grade:
    """alice handed in tensors.ipynb: one failure, and the notebook printed while it was imported."""
    return Grade(submission="alice", devices=["cpu"], notebooks={"tensors": "tensors.ipynb"}, tests=[
        _result("tensors.view: matches [cpu]", "failed", output="called: view(x)\nthe result: expected 1, got 2")],
        output="graded on: cpu\n--- printed by tensors.ipynb while importing ---\nhello")


def test_a_module_graded_from_a_notebook_is_named_by_its_file_on_pages_and_in_the_terminal(assignment):
    """The terminal, the report and the printed-output heading say `tensors.ipynb`, results.json keeps
    which modules came from notebooks (a report rebuilt from it says the same); a .py module keeps its name."""
    from torchgrade.engine.results import read_grade, results_document

    grade = _notebook_grade()
    text = click.unstyle("\n".join(terminal.render(build(grade, assignment))))
    page = render_report(grade, assignment)
    assert "tensors.ipynb" in text and "tensors.py" not in text, text
    assert "<code>tensors.ipynb</code>" in page and "tensors.py" not in page
    assert "printed by tensors.ipynb while importing" in page
    assert read_grade(results_document(grade, assignment)).notebooks == {"tensors": "tensors.ipynb"}
    plain = Grade(submission="bob", devices=["cpu"], tests=grade.tests)
    assert "tensors.py" in click.unstyle("\n".join(terminal.render(build(plain, assignment))))
    assert "<code>tensors.py</code>" in render_report(plain, assignment)


def test_a_reports_rerun_line_of_a_notebook_module_checks_the_students_notebooks_folder(assignment):
    """A report of `grade` or the autograder (no --path known): the rerun line checks `notebooks/`, where the
    bundle keeps the student's notebooks, not the untouched stub in exercises/; a .py module's checks the
    default folder; a student's own `--path` and the kernel's magic are kept as they are."""
    grade = _notebook_grade()
    assert build(grade, assignment).failures[0].rerun == \
        "torchgrade check tensors.view::test_x --device cpu --path notebooks"
    assert "<code>torchgrade check tensors.view::test_x --device cpu --path notebooks</code>" in \
        render_report(grade, assignment)
    assert build(grade, assignment, path="mine").failures[0].rerun.endswith("--device cpu --path mine")
    assert "--path" not in build(grade, assignment, path="").failures[0].rerun  # `check` of the default folder
    assert build(grade, assignment, command="%torchgrade check").failures[0].rerun == \
        "%torchgrade check tensors.view::test_x --device cpu"
    plain = Grade(submission="bob", devices=["cpu"], tests=grade.tests)
    assert "--path" not in build(plain, assignment).failures[0].rerun


def test_the_cuda_note_draws_its_icon_with_no_font(assignment):
    """An icon a fresh Linux's fonts lack (U+24D8) shows as an empty box: the note's icon is inline SVG."""
    grade = Grade(submission="alice", devices=["cpu"], standin="score",
                  tests=[_result("tensors.view: matches [cuda]", "passed", device="cuda", score=1.0)])
    page = render_report(grade, assignment)
    note = page[page.index('id="cuda-standin"'):]
    note = note[:note.index("</div>")]
    assert "<svg" in note and all(ord(c) < 0x2000 for c in note), note
    for template in (ROOT / "torchgrade" / "templates").glob("*.html"):
        assert "\u24d8" not in template.read_text(encoding="utf-8"), template


# --- expected outcomes without the reference (what the student bundle relies on) ----------------

def _view_request(x, *shape):
    return {"probe": "view", "args": [x, *shape], "kwargs": {}, "options": {}}


def test_request_keys_depend_on_content_strides_and_shared_storage_not_on_identity():
    x = torch.arange(12.0)
    assert request_key("tensors", "view", _view_request(x, 3, 4)) == \
        request_key("tensors", "view", _view_request(x.clone(), 3, 4))
    keys = {request_key("tensors", "view", r) for r in (
        _view_request(x, 3, 4), _view_request(x, 4, 3), _view_request(x.reshape(3, 4).t(), 12),
        _view_request(x + 1, 3, 4), _view_request(x.double(), 3, 4))}
    assert len(keys) == 5
    y = torch.arange(4.0)
    shared = {"probe": "call", "args": [y, y], "kwargs": {}, "options": {}}
    separate = {"probe": "call", "args": [y, y.clone()], "kwargs": {}, "options": {}}
    assert request_key("e", "f", shared) != request_key("e", "f", separate)
    assert request_key("e", "f", shared) == request_key("e", "f", shared, as_cpu=True)


def test_recorded_outcomes_replace_the_reference_and_carry_no_reference_source(tmp_path):
    reference = ROOT / "reference" / "tensors.py"
    good, bad = _view_request(torch.arange(6.0), 2, 3), _view_request(torch.arange(6.0), 4, 2)
    with recording() as recorded:
        live = reference_outcome(reference, "view", good)
        raised = reference_outcome(reference, "view", bad)
    assert raised["value"]["__raised__"] == "RuntimeError" and raised["value"]["traceback"]  # quotes reference lines
    save_recording(recorded["tensors"], tmp_path / "expected" / "tensors.pt", ["cpu"])

    stand_in = tmp_path / "expected" / "tensors.py"  # absent: the recording beside it answers
    replayed = reference_outcome(stand_in, "view", _view_request(torch.arange(6.0), 2, 3))
    assert torch.equal(replayed["value"]["value"], live["value"]["value"])
    assert replayed["value"]["stride"] == live["value"]["stride"] == (3, 1)
    assert "traceback" not in reference_outcome(stand_in, "view", bad)["value"]
    with pytest.raises(GraderError, match="no expected outcome was recorded for tensors.view"):
        reference_outcome(stand_in, "view", _view_request(torch.arange(6.0), 3, 2))
    data = torch.load(tmp_path / "expected" / "tensors.pt", weights_only=True)
    assert data["devices"] == ["cpu"] and len(data["outcomes"]) == 2


def test_the_terminal_shows_the_first_failure_per_target_and_all_of_them_when_verbose(assignment):
    long = "called: view(x)\n" + "\n".join(f"line {i}" for i in range(30))
    grade = Grade(submission="s", devices=["cpu"], tests=[
        _result("tensors.view: first claim [cpu]", "failed", output=long),
        _result("tensors.view: second claim [cpu]", "failed", output="called: view(y)\nthe result: expected 1, got 2"),
        _result("tensors.one_hot: encodes [cpu]", "failed",
                output="one_hot is not implemented yet (it raises NotImplementedError)"),
    ])
    lines = [click.unstyle(line) for line in terminal.render(build(grade, assignment))]
    text = "\n".join(lines)
    assert "first claim [cpu]" in text and "second claim" not in text
    assert "... (17 more lines in the report)" in text
    assert "... and 1 more failing checks of tensors.view" in text
    assert any(re.match(r" +✗ one_hot +0 / 1 +one_hot is not implemented yet", line) for line in lines), text
    verbose = click.unstyle("\n".join(terminal.render(build(grade, assignment), verbose=True)))
    assert "second claim [cpu]" in verbose and "line 29" in verbose and "more lines" not in verbose


def test_a_check_whose_comparison_outlasts_the_graders_budget_fails_for_that_student_and_grading_goes_on(
        grade, monkeypatch):
    """The trusted side's work on one check has a time budget (torchgrade/engine/bounds.py): a check over it
    fails with a message that says so, the next checks run."""
    from torchgrade.engine import bounds, compare

    real, slow = compare.compare, set()

    def stuck(expected, actual, *args, **kwargs):
        if isinstance(expected, tuple) and not slow:  # the first check of broadcast_shape: never ends
            slow.add(1)
            while True:
                pass
        return real(expected, actual, *args, **kwargs)

    monkeypatch.setattr(bounds, "CHECK_SECONDS", 0.5)
    monkeypatch.setattr(compare, "compare", stuck)
    g = grade(only=("tensors.broadcast_shape",))
    failed = [t for t in g.tests if t.status == "failed"]
    assert len(failed) == 1 and "stopped comparing your result after 0.5 s" in failed[0].output
    assert sum(t.status == "passed" for t in g.tests) == len(g.tests) - 1 > 3
