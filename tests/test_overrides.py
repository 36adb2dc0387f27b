"""The instructor's decisions (DIR/overrides.yaml, torchgrade/classroom/overrides.py) survive every regrade, resume,
--force, merge and export, with real files: the tiny course's class graded by the CLI, an overrides file
the instructor writes, then a late file, a regrade, a merge of shards and the gradebooks."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchgrade.cli import main
from torchgrade.engine.config import load_assignment

from tiny_course import copy_class, make_course

OVERRIDES = """\
# The instructor's decisions for the tiny course (docs/class-grading.md, "Overrides").
- student: bob
  target: tensors.one_hot
  points: 2
  reason: one_hot was shown working in the lab on 3 December
- student: carol
  target: tensors.broadcast_shape
  verdict: failed
  reason: copied from the forum (academic integrity case 12)
"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return load_assignment(make_course(tmp_path_factory.mktemp("course")))


@pytest.fixture
def cls(tmp_path):
    return copy_class({"alice": "reference", "bob": "stub", "carol": "reference"}, tmp_path / "class")


def grade(course, *args: str):
    result = CliRunner().invoke(main, ["grade", *args, "--device", "cpu", "--assignment", str(course.path)])
    return result


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _csv(out: Path) -> dict[str, str]:
    return {row["submission"]: row["score"] for row in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}


def test_decisions_survive_a_resume_a_force_and_a_late_file(course, cls, tmp_path):
    out = tmp_path / "out"
    assert grade(course, str(cls), "--out", str(out)).exit_code == 0
    assert _csv(out) == {"alice": "5.0", "bob": "0.0", "carol": "5.0"}

    (out / "overrides.yaml").write_text(OVERRIDES)
    result = grade(course, str(cls), "--out", str(out))  # a resume: nothing is graded again
    assert result.exit_code == 0, result.output
    assert _csv(out) == {"alice": "5.0", "bob": "2.0", "carol": "3.0"}
    student = _json(out / "bob" / "results.json")
    instructor = _json(out / "bob" / "instructor" / "results.json")
    assert student["score"] == instructor["score"] == 2.0
    assert student["output"].startswith("adjusted by the instructor: one_hot was shown working in the lab on 3 December")
    assert "automatic" not in json.dumps(student)  # the student's copy: the adjusted score only
    assert "[automatic: 0]" in instructor["output"]
    assert all(t["extra_data"]["automatic_score"] == 0 for t in instructor["tests"] if t["extra_data"].get("adjusted"))
    report = (out / "bob" / "report.html").read_text()
    assert "adjusted by the instructor: one_hot was shown working in the lab on 3 December" in report
    assert "automatic: 0" not in report and "automatic: 0" in (out / "bob" / "instructor" / "report.html").read_text()
    index = (out / "index.html").read_text()
    assert 'id="adjustments"' in index and "academic integrity case 12" in index
    junit = ET.fromstring((out / "junit.xml").read_text())
    scores = {s.get("name"): s.find("properties/property[@name='score']").get("value") for s in junit.iter("testsuite")}
    assert scores == {"alice": "5.0", "bob": "2.0", "carol": "3.0"}

    assert grade(course, str(cls), "--out", str(out), "--force").exit_code == 0  # every submission graded again
    assert _csv(out) == {"alice": "5.0", "bob": "2.0", "carol": "3.0"}

    # A late file: bob's submission changes; the decision stays, flagged for the instructor (not the student).
    (cls / "bob" / "tensors.py").write_text((cls / "bob" / "tensors.py").read_text() + "\n# late change\n")
    result = grade(course, str(cls), "--out", str(out))
    assert result.exit_code == 0 and "graded 1, skipped 2 already graded" in result.output, result.output
    assert _csv(out)["bob"] == "2.0"
    instructor = _json(out / "bob" / "instructor" / "results.json")
    flagged = instructor["extra_data"]["adjustments"][0]["review"]
    assert flagged.startswith("the submission changed since this decision was made") and "content: " in flagged
    assert "review" not in json.dumps(_json(out / "bob" / "results.json")["extra_data"])
    assert "changed since this decision was made" in (out / "index.html").read_text()
    assert "changed since" not in (out / "carol" / "instructor" / "results.json").read_text()

    # Removing a decision gives torchgrade's own score back, on the next run.
    (out / "overrides.yaml").write_text(OVERRIDES.split("- student: carol")[0])
    assert grade(course, str(cls), "--out", str(out)).exit_code == 0
    assert _csv(out) == {"alice": "5.0", "bob": "2.0", "carol": "5.0"}
    assert "adjusted" not in (out / "carol" / "report.html").read_text()


def test_decisions_apply_to_merged_shards_and_to_the_lms_gradebook(course, cls, tmp_path):
    shards = []
    for i in (1, 2):
        shards.append(tmp_path / f"shard{i}")
        assert grade(course, str(cls), "--out", str(shards[-1]), "--shard", f"{i}/2").exit_code == 0
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / "overrides.yaml").write_text(OVERRIDES)
    result = CliRunner().invoke(main, ["merge", *map(str, shards), "--out", str(merged), "--assignment", str(course.path)])
    assert result.exit_code == 0, result.output
    assert _csv(merged) == {"alice": "5.0", "bob": "2.0", "carol": "3.0"}
    assert _json(merged / "carol" / "results.json")["score"] == 3.0
    assert "adjusted by the instructor: copied from the forum" in (merged / "carol" / "report.html").read_text()

    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,submission\nAlice,1,,,,alice\nBob,2,,,,bob\nCarol,3,,,,carol\n")
    gradebook = tmp_path / "canvas.csv"
    result = CliRunner().invoke(main, ["export", "canvas", str(merged), "-o", str(gradebook), "--roster", str(roster),
                                       "--assignment", str(course.path)])
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(gradebook.read_text())))
    assert {r[0]: r[5] for r in rows[2:]} == {"Alice": "5", "Bob": "2", "Carol": "3"}


@pytest.mark.parametrize("entry, message", [
    ("- student: bobby\n  points: 1\n  reason: x\n", "unknown student 'bobby' (did you mean 'bob'?)"),
    ("- student: bob\n  target: tensors.one_hots\n  points: 1\n  reason: x\n",
     "unknown target 'tensors.one_hots' (did you mean 'tensors.one_hot'?)"),
    ("- student: bob\n  target: tensors.one_hot\n  points: 9\n  reason: x\n", "points: expected a number from 0 to 3"),
    ("- student: bob\n  target: tensors.one_hot\n  verdict: passed\n", "no reason"),
], ids=["student", "target", "too-many-points", "no-reason"])
def test_a_wrong_decision_is_one_line_exit_2_and_nothing_written(course, cls, tmp_path, entry, message):
    out = tmp_path / "out"
    out.mkdir()
    (out / "overrides.yaml").write_text(entry)
    result = grade(course, str(cls), "--out", str(out))
    assert result.exit_code == 2, result.output
    assert message in result.output and "line 1" in result.output and len(result.output.strip().splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["overrides.yaml"]


def _grade(course):
    """A grade of the tiny course in memory: broadcast_shape passed, one_hot's two checks failed."""
    from torchgrade.engine.scoring import CheckResult, Grade, assign_points

    tests = [CheckResult("a", "tensors.broadcast_shape: matches torch broadcast shapes", "tensors", "broadcast_shape",
                         None, "visible", "passed"),
             CheckResult("b", "tensors.one_hot: matches one_hot on a small input [cpu]", "tensors", "one_hot", "cpu",
                         "visible", "failed"),
             CheckResult("c", "tensors.one_hot: infers the number of classes [cpu]", "tensors", "one_hot", "cpu",
                         "visible", "failed")]
    assign_points(tests, course)
    return Grade("bob", tests)


def test_a_check_a_target_and_the_whole_submission_each_set_their_own_points_narrower_last(course, tmp_path):
    from torchgrade.classroom.overrides import Overrides
    from torchgrade.engine.results import read_grade, results_document

    (tmp_path / "overrides.yaml").write_text(
        "- student: bob\n  points: 1\n  reason: whole\n"
        "- student: bob\n  check: 'tensors.one_hot: infers the number of classes [cpu]'\n  verdict: passed\n  reason: one check\n")
    decisions = Overrides.load(tmp_path, course, ["bob"])
    grade = decisions.apply(_grade(course), "dir:1")
    scores = [t.score for t in grade.tests]
    # the check's decision wins on its check; the whole is 1 plus what the narrower decision changed (0 -> 1.5);
    # no point is spread over checks torchgrade scored 0
    assert scores == pytest.approx([2.0, 0.0, 1.5]) and grade.score == 2.5
    assert [t.automatic for t in grade.tests] == [None, None, 0.0]
    assert [a["scope"] for a in grade.adjustments] == ["the whole submission",
                                                       "check 'tensors.one_hot: infers the number of classes [cpu]'"]
    # read back from the instructor's copy: torchgrade's own scores, ready for the decisions to apply anew
    back = read_grade(results_document(grade, course, instructor=True))
    assert [t.score for t in back.tests] == [2.0, 0.0, 0.0] and back.output == ""
    assert [t.score for t in decisions.apply(back, "dir:1").tests] == pytest.approx(scores) and back.score == 2.5
    assert decisions.apply(_grade(course), "dir:2").adjustments[0]["review"].startswith("the submission changed")


def test_a_decision_for_a_check_the_submission_does_not_have_is_flagged_not_applied(course, tmp_path):
    from torchgrade.classroom.overrides import Overrides

    (tmp_path / "overrides.yaml").write_text(
        "- student: bob\n  check: 'tensors.one_hot: a check renamed since [cpu]'\n  verdict: passed\n  reason: r\n")
    grade = Overrides.load(tmp_path, course, ["bob"]).apply(_grade(course), None)
    assert grade.score == 2.0 and grade.adjustments[0]["review"].startswith("it covers no graded check")


#: dan's one_hot needs num_classes: it fails "infers the number of classes" and passes the rest (3.5 of 5).
NEEDS_NUM_CLASSES = """
def one_hot(labels, num_classes=-1):
    if num_classes == -1:
        raise RuntimeError("give num_classes")
    return (labels.unsqueeze(-1) == torch.arange(num_classes, device=labels.device)).to(torch.int64)
"""
INFERS = "tensors.one_hot: infers the number of classes [cpu]"


def test_the_most_specific_decision_wins_a_penalty_applies_last_and_an_excused_check_leaves_the_total(course, tmp_path):
    from tiny_course import student

    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    student(cls / "dan", extra=NEEDS_NUM_CLASSES)
    out = tmp_path / "out"
    assert grade(course, str(cls), "--out", str(out)).exit_code == 0
    assert _csv(out) == {"alice": "5.0", "bob": "0.0", "dan": "3.5"}

    # A misspelt check is refused as a misspelt student is, once the class's checks are known.
    (out / "overrides.yaml").write_text(f"- student: bob\n  check: '{INFERS.replace('classes', 'clases')}'\n"
                                        "  verdict: passed\n  reason: r\n")
    result = grade(course, str(cls), "--out", str(out))
    assert result.exit_code == 2 and f"unknown check '{INFERS.replace('classes', 'clases')}' (did you mean '{INFERS}'?)" \
        in result.output and "line 1" in result.output, result.output

    (out / "overrides.yaml").write_text(f"""\
- student: alice
  points: 4
  reason: regraded by hand
- student: bob
  points: 2
  reason: partial credit for the write-up
- student: bob
  check: '{INFERS}'
  verdict: passed
  reason: shown working in the lab
- student: bob
  penalty: 0.1
  reason: two days late
- student: dan
  check: '{INFERS}'
  verdict: excused
  reason: the check was not covered in class
""")
    result = grade(course, str(cls), "--out", str(out))
    assert result.exit_code == 0, result.output
    # alice: the whole-score decision is her score, her checks keep torchgrade's points; bob: 2, plus the check
    # his narrower decision gave (0 -> 1.5), then 10% off; dan: the excused check leaves the total (3.5 of 3.5)
    expected = {"alice": 4.0, "bob": 3.15, "dan": 5.0}
    assert {k: float(v) for k, v in _csv(out).items()} == expected
    assert "score: mean 4.05" in result.output  # the run's summary reflects the decisions it applied
    for name, score in expected.items():
        assert _json(out / name / "results.json")["score"] == score
        assert _json(out / name / "results.json")["extra_data"]["max_score"] == 5.0
    assert [t["score"] for t in _json(out / "alice" / "results.json")["tests"]] == [2.0, 1.5, 1.5]
    dan = {t["name"]: t for t in _json(out / "dan" / "results.json")["tests"]}
    assert dan[INFERS]["extra_data"]["excused"] is True and "the check was not covered" in dan[INFERS]["output"]
    bob = _json(out / "bob" / "instructor" / "results.json")["extra_data"]["adjustments"]
    assert [(a["scope"], a["points"]) for a in bob] == [("the whole submission", 2.0), (f"check '{INFERS}'", 1.5),
                                                        ("late penalty 10%", 3.15)]
    index = (out / "index.html").read_text()
    assert "(torchgrade: 1.5)" not in index and "(torchgrade: 0)" in index
    assert "excused — the check was not covered in class" in index and "3.15 of 5 — two days late" in index

    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,submission\nAlice,1,,,,alice\nBob,2,,,,bob\nDan,4,,,,dan\n")
    for lms, column in (("canvas", 5), ("moodle", 1)):
        book = tmp_path / f"{lms}.csv"
        if lms == "moodle":
            roster.write_text("Email address,submission\na@x,alice\nb@x,bob\nd@x,dan\n")
        result = CliRunner().invoke(main, ["export", lms, str(out), "-o", str(book), "--roster", str(roster),
                                           "--assignment", str(course.path)])
        assert result.exit_code == 0, result.output
        rows = list(csv.reader(io.StringIO(book.read_text())))
        assert sorted(float(r[column]) for r in rows[2 if lms == "canvas" else 1:]) == sorted(expected.values())
