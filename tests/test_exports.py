"""Class exports and the overview page: grades.csv, junit.xml, index.html, and grades read back."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import xmlschema

from torchgrade.classroom.batch import grade_class, write_class_pages
from torchgrade.engine.config import load_assignment
from torchgrade.outputs.exports import grades_csv, junit_xml, load_grade
from torchgrade.outputs.overview import histogram, item_analysis
from torchgrade.engine.results import INSTRUCTOR_FOLDER, results_document, write_results
from torchgrade.engine.scoring import CheckResult, Grade

from tiny_course import copy_class, make_course, student


HERE = Path(__file__).resolve().parent
#: Gradescope's results.json format, transcribed from its specification (see the file's $comment).
GRADESCOPE = json.loads((HERE / "gradescope_results.schema.json").read_text())
#: The Jenkins xUnit plugin's JUnit schema (vendored; see the file's header).
JUNIT_XSD = xmlschema.XMLSchema(str(HERE / "junit-10.xsd"))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return load_assignment(make_course(tmp_path_factory.mktemp("course")))


def check(name, target, status, score, top, output="", device="cpu"):
    return CheckResult(nodeid=name, name=name, exercise="tensors", target=target, device=device,
                       visibility="visible", status=status, output=output, score=float(score), max_score=float(top))


def made_up_class():
    """Three students, two checks each: one_hot is the hard one."""
    return [
        Grade("ann", [check("tensors.one_hot: a", "one_hot", "passed", 3, 3), check("tensors.broadcast_shape: b", "broadcast_shape", "passed", 2, 2)],
              devices=["cpu"]),
        Grade("ben", [check("tensors.one_hot: a", "one_hot", "failed", 0, 3, "expected 1, got 0 <at> [0]"),
                      check("tensors.broadcast_shape: b", "broadcast_shape", "passed", 2, 2)], devices=["cpu"]),
        Grade("=cmd|' /C calc'!A0", [check("tensors.one_hot: a", "one_hot", "error", 0, 3, "Timeout (>10s) \x00\x1b[31m ]]> & <"),
                                     check("tensors.broadcast_shape: b", "broadcast_shape", "failed", 0, 2)], devices=["cpu"]),
    ]


def test_the_gradebook_has_one_row_per_student_and_one_column_per_exercise(course):
    rows = list(csv.reader(io.StringIO(grades_csv(made_up_class(), course))))
    assert rows[0] == ["submission", "tensors", "score", "max_score"]
    assert rows[1:3] == [["ann", "5.0", "5.0", "5.0"], ["ben", "2.0", "2.0", "5.0"]]
    # a name a spreadsheet would run as a formula is written as text
    assert rows[3][0] == "'=cmd|' /C calc'!A0"


def test_junit_has_a_suite_per_submission_and_a_case_per_check_and_survives_any_output():
    text = junit_xml(made_up_class())
    JUNIT_XSD.validate(text)  # what the Jenkins xUnit plugin accepts
    root = ET.fromstring(text.encode())
    assert root.tag == "testsuites" and root.get("tests") == "6" and root.get("failures") == "2" and root.get("errors") == "1"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["ann", "ben", "=cmd|' /C calc'!A0"]
    # Reporters that group by file or class keep students apart.
    assert [s.get("file") for s in suites] == ["ann/results.json", "ben/results.json", "=cmd|' /C calc'!A0/results.json"]
    assert {c.get("classname").split(".")[0] for c in suites[0].iter("testcase")} == {"ann"}
    assert [len(s.findall("testcase")) for s in suites] == [2, 2, 2]
    ben = suites[1].findall("testcase")[0]
    assert ben.get("classname") == "ben.tensors.one_hot" and ben.get("name") == "tensors.one_hot: a"
    assert ben.find("failure").text == "expected 1, got 0 <at> [0]"
    error = suites[2].findall("testcase")[0].find("error")
    assert error.get("message").startswith("Timeout (>10s)")
    assert "]]> & <" in error.text and "\x00" not in error.text  # escaped, and the NUL XML can't hold replaced
    props = {p.get("name"): p.get("value") for p in suites[0].find("properties")}
    assert props == {"score": "5.0", "max_score": "5.0", "devices": "cpu"}


def test_the_histogram_counts_each_score_in_one_bar():
    bins = histogram([0, 0.4, 5, 9.99, 10], 10, bins=5)
    assert [(b.low, b.high, b.count) for b in bins] == [(0, 2, 2), (2, 4, 0), (4, 6, 1), (6, 8, 0), (8, 10, 2)]


def test_item_analysis_puts_the_hardest_check_first():
    items = item_analysis(made_up_class())
    assert [(i.name, i.passed, i.graded, i.errors) for i in items] == [
        ("tensors.one_hot: a", 1, 3, 1), ("tensors.broadcast_shape: b", 2, 3, 0)]


def test_the_overview_page_shows_the_distribution_the_items_and_a_sortable_table_offline(course, tmp_path):
    write_class_pages(made_up_class(), course, tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert page.startswith("<!doctype html>")  # extends base.html
    assert "<svg" in page and 'aria-label="Histogram of scores"' in page
    assert page.index("tensors.one_hot: a") < page.index("tensors.broadcast_shape: b")  # hardest first
    assert "33%" in page and "(1 / 3)" in page
    assert 'href="ann/report.html"' in page and 'data-sort="5.0"' in page
    assert "table.sortable" in page and "<script>" in page
    assert "graded on" in page and ">cpu<" in page
    assert "=cmd|&#39; /C calc&#39;!A0" in page  # autoescaped
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched from the network


def test_the_overview_page_says_which_device_facts_came_from_the_cuda_stand_in(course, tmp_path):
    """As each student's report does (docs/devices.md): the CUDA checks were graded on the stand-in, not a
    GPU, under which policy, and for how many of the submissions where not all."""
    write_class_pages(made_up_class(), course, tmp_path / "gpu")
    assert "stand-in" not in (tmp_path / "gpu" / "index.html").read_text()  # a GPU (or nothing) graded cuda
    graded = [dataclasses.replace(g, standin="score") for g in made_up_class()]
    write_class_pages(graded, course, tmp_path / "all")
    page = (tmp_path / "all" / "index.html").read_text()
    line = "CUDA checks: graded on the CUDA stand-in, not a GPU (cuda_standin: score)"
    assert page.count(line) == 1 and 'id="cuda-standin"' in page and "of 3 submissions" not in page
    assert page.index("graded on</div>") < page.index(line) < page.index("<h2>Students</h2>")  # in the header
    graded[0].standin = ""  # a merged class: one graded on a GPU
    graded[1].standin = "warn"
    write_class_pages(graded, course, tmp_path / "mixed")
    page = (tmp_path / "mixed" / "index.html").read_text()
    assert "1 of 3 submissions: " + line in page
    assert "1 of 3 submissions: CUDA checks: graded on the CUDA stand-in, not a GPU (cuda_standin: warn)" in page


def test_the_class_pages_of_a_graded_class_come_from_its_results(course, tmp_path):
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    student(cls / "<i>mallory&co")
    from torchgrade.classroom.submissions import discover

    result = grade_class(discover([cls], ("tensors",)), course, tmp_path / "out", device="cpu")
    page = (tmp_path / "out" / "index.html").read_text()
    assert "&lt;i&gt;mallory&amp;co" in page and "<i>mallory" not in page
    assert "3</b>submissions" in page
    back = load_grade(tmp_path / "out" / "alice" / "results.json")
    alice = next(g for g in result.grades if g.submission == "alice")
    assert [(t.name, t.status, t.score, t.max_score, t.device) for t in back.tests] == \
        [(t.name, t.status, round(t.score, 4), round(t.max_score, 4), t.device) for t in alice.tests]
    assert back.devices == ["cpu"] and back.submission == "alice"
    suites = ET.parse(tmp_path / "out" / "junit.xml").getroot().findall("testsuite")
    assert sorted(s.get("name") for s in suites) == ["<i>mallory&co", "alice", "bob"]


def every_outcome() -> Grade:
    """A grade with each of torchgrade's outcomes, a hidden check, thirds of a point and printed text."""
    third = 1 / 3
    tests = [check("tensors.one_hot: a [cpu]", "one_hot", "passed", third, third),
             check("tensors.one_hot: b [cpu]", "one_hot", "failed", 0, third, "expected 1, got 0 <b>bold</b>"),
             check("tensors.one_hot: a [cuda]", "one_hot", "skipped", 0, 0, "CUDA is not available on this machine",
                   device="cuda"),
             check("tensors.one_hot: c [cpu]", "one_hot", "error", 0, third, "Timeout (>10s)"),
             dataclasses.replace(check("tensors.broadcast_shape: b", "broadcast_shape", "passed", 2, 2, device=None),
                                 visibility="hidden", duration=0.25)]
    for i, t in enumerate(tests):
        t.duration = t.duration or 0.01 * (i + 1)
    return Grade("ann", tests, execution_time=1.5, output="graded on: cpu\n--- printed by tensors ---\n<script>",
                 devices=["cpu"], isolation="bwrap")


def test_results_json_is_valid_against_gradescopes_spec_with_torchgrades_outcomes_in_extra_data(course):
    document = results_document(every_outcome(), course)
    jsonschema.validate(document, GRADESCOPE)
    assert {t["status"] for t in document["tests"]} == {"passed", "failed"}
    assert [t["extra_data"]["outcome"] for t in document["tests"]] == ["passed", "failed", "error", "passed"]
    assert document["output_format"] == "text" and {t["output_format"] for t in document["tests"]} == {"text"}
    # The check skipped for a missing device is not a test: its count and reason are in the output.
    assert all("[cuda]" not in t["name"] for t in document["tests"])
    assert document["extra_data"]["skipped"] == 1
    assert document["output"].endswith("1 check skipped: CUDA is not available on this machine")
    assert document["tests"][-1]["visibility"] == course.hidden_visibility
    assert document["extra_data"]["max_score"] == 3.0
    # Exact scores that add up to the total (no per-test rounding).
    assert document["tests"][0]["score"] == 1 / 3
    assert round(math.fsum(t["score"] for t in document["tests"]), 4) == document["score"] == round(1 / 3 + 2, 4)
    assert round(math.fsum(t["max_score"] for t in document["tests"]), 4) == document["extra_data"]["max_score"]


def test_the_schema_rejects_what_gradescope_rejects(course):
    """The transcribed schema is live: the old format's faults are each refused."""
    good = results_document(every_outcome(), course)
    for fault in (lambda d: d["tests"][0].update(status="error"), lambda d: d["tests"][0].update(exercise="tensors"),
                  lambda d: d.update(max_score=3.0), lambda d: d.update(output_format="rtf"),
                  lambda d: d["tests"][0].update(visibility="secret")):
        bad = json.loads(json.dumps(good))
        fault(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, GRADESCOPE)


def test_a_grade_read_back_from_results_json_is_the_grade_written(course, tmp_path):
    grade = every_outcome()
    write_results(grade, course, tmp_path / "ann" / "results.json")
    if any(t.visibility != "visible" for t in grade.tests):  # the student's copy keeps nothing of hidden checks
        assert load_grade(tmp_path / "ann" / "results.json") != grade  # but their names, verdicts and points
    write_results(grade, course, tmp_path / "ann" / INSTRUCTOR_FOLDER / "results.json", instructor=True)
    back = load_grade(tmp_path / "ann" / "results.json")  # (as `grade` writes them: the instructor's copy beside)
    assert back == grade  # every field of every check (order, outcomes, durations, skipped ones) and the output
    # so a resumed or merged run's class files are byte for byte those of a fresh run
    assert grades_csv([back], course) == grades_csv([grade], course)
    assert junit_xml([back]) == junit_xml([grade])
    assert 'time="0.250"' in junit_xml([back])


def test_output_files_are_world_readable_unless_private(course, tmp_path):
    write_class_pages(made_up_class(), course, tmp_path / "public")
    assert {oct(p.stat().st_mode & 0o777) for p in (tmp_path / "public").iterdir()} == {oct(0o644)}
    from torchgrade.engine import results

    results.set_private(True)
    try:
        write_class_pages(made_up_class(), course, tmp_path / "private")
    finally:
        results.set_private(False)
    assert {oct(p.stat().st_mode & 0o777) for p in (tmp_path / "private").iterdir()} == {oct(0o600)}


def test_a_graded_classs_results_and_junit_are_valid_for_their_consumers(course, tmp_path):
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    from torchgrade.classroom.submissions import discover

    grade_class(discover([cls], ("tensors",)), course, tmp_path / "out", device="all")
    for name in ("alice", "bob"):
        document = json.loads((tmp_path / "out" / name / "results.json").read_text())
        jsonschema.validate(document, GRADESCOPE)
    alice = json.loads((tmp_path / "out" / "alice" / "results.json").read_text())
    assert alice["score"] == alice["extra_data"]["max_score"] == 5
    JUNIT_XSD.validate(str(tmp_path / "out" / "junit.xml"))
    cases = ET.parse(tmp_path / "out" / "junit.xml").getroot().iter("testcase")
    assert any(float(c.get("time")) > 0 for c in cases)  # real durations, not 0.000


def test_a_resumed_run_writes_the_class_files_of_the_fresh_run_byte_for_byte(course, tmp_path):
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    from torchgrade.classroom.submissions import discover

    submissions = discover([cls], ("tensors",))
    grade_class(submissions, course, tmp_path / "out", device="cpu")
    fresh = {name: (tmp_path / "out" / name).read_bytes() for name in ("grades.csv", "junit.xml")}
    again = grade_class(submissions, course, tmp_path / "out", device="cpu")
    assert sorted(again.skipped) == ["alice", "bob"]  # read back from results.json, not graded again
    assert {name: (tmp_path / "out" / name).read_bytes() for name in fresh} == fresh


def test_a_merged_run_writes_the_gradebook_of_a_fresh_run_byte_for_byte_with_thirds_of_points(tmp_path):
    """One point over three checks: per-test rounding made 2 of 3 passed worth 0.6666, read back."""
    from torchgrade.classroom.shards import Shard, merge
    from torchgrade.classroom.submissions import discover

    path = make_course(tmp_path / "course")
    path.write_text(path.read_text().replace("one_hot: 3", "one_hot: 1"))
    checks = next((tmp_path / "course").glob("tinychecks_*")) / "visible" / "test_tensors.py"
    checks.write_text(checks.read_text() + '''

@pytest.mark.target("one_hot")
def test_matches_one_hot_with_more_classes(check, device):
    check(torch.tensor([1, 0], device=device), 4)
''')
    course = load_assignment(path)
    cls = copy_class({"alice": "reference", "carol": "reference", "dan": "stub"}, tmp_path / "class")
    student(cls / "bob", extra="""
        _one_hot = one_hot

        def one_hot(labels, num_classes):
            if num_classes < 0:
                raise ValueError("no inference")
            return _one_hot(labels, num_classes)
    """)
    submissions = discover([cls], ("tensors",))
    grade_class(submissions, course, tmp_path / "whole", device="cpu")
    shards = [tmp_path / "shard1", tmp_path / "shard2"]
    for i, folder in enumerate(shards, 1):
        grade_class(Shard(i, 2).select(submissions), course, folder, device="cpu")
    grades, _ = merge(shards, tmp_path / "merged")
    write_class_pages(grades, course, tmp_path / "merged")
    whole = (tmp_path / "whole" / "grades.csv").read_bytes()
    assert (tmp_path / "merged" / "grades.csv").read_bytes() == whole
    bob = next(r for r in csv.reader(io.StringIO(whole.decode())) if r[0] == "bob")
    assert bob[-2] == str(round(2 + 2 / 3, 4))  # 2.6667, not 2.6666


def test_the_students_copy_holds_nothing_of_a_hidden_check_but_its_name_verdict_and_points(course, tmp_path):
    """results.json (the student's copy) and the student's report: a failed hidden check by name and verdict,
    nothing printed once hidden checks had begun; the instructor's copy (DIR/<submission>/instructor/) has
    it all, and a grade is read back from it."""
    from torchgrade.classroom.batch import write_outputs

    hidden = dataclasses.replace(check("tensors.one_hot: hidden", "one_hot", "failed", 0, 3, "called: one_hot(SECRET-INPUT)"),
                                 visibility="hidden")
    visible = check("tensors.one_hot: shown", "one_hot", "failed", 0, 3, "called: one_hot(VISIBLE-INPUT)")
    grade = Grade("ann", [visible, hidden], devices=["cpu"], output="graded on: cpu\n--- printed by tensors.one_hot ---\nSHOWN",
                  hidden_output="--- printed by tensors.one_hot ---\nSECRET-PRINTED")
    student = json.dumps(results_document(grade, course))
    assert "SECRET" not in student and "VISIBLE-INPUT" in student and "SHOWN" in student
    jsonschema.validate(json.loads(student), GRADESCOPE)
    (test,) = [t for t in json.loads(student)["tests"] if t["name"] == "tensors.one_hot: hidden"]
    assert test["status"] == "failed" and test["score"] == 0 and "instructor's copy" in test["output"]
    instructor = json.dumps(results_document(grade, course, instructor=True))
    assert "SECRET-INPUT" in instructor and "SECRET-PRINTED" in instructor

    write_outputs(grade, course, tmp_path)
    for name in ("results.json", "report.html"):
        assert "SECRET" not in (tmp_path / "ann" / name).read_text()
        assert "SECRET-INPUT" in (tmp_path / "ann" / "instructor" / name).read_text()
    assert "SECRET-PRINTED" in (tmp_path / "ann" / "instructor" / "report.html").read_text()
    assert "instructor/" not in (tmp_path / "ann" / "report.html").read_text()  # the student's page does not link it
    assert (tmp_path / "ann" / "instructor").stat().st_mode & 0o777 == 0o700
    assert load_grade(tmp_path / "ann" / "results.json") == grade  # resumed and merged runs keep everything
