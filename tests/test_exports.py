"""Class exports and the overview page: grades.csv, junit.xml, index.html, and grades read back."""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

import pytest

from torchgrade.batch import grade_class, write_class_pages
from torchgrade.config import load_assignment
from torchgrade.exports import grades_csv, junit_xml, load_grade
from torchgrade.overview import histogram, item_analysis
from torchgrade.scoring import CheckResult, Grade

from tiny_course import copy_class, make_course, student


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
    root = ET.fromstring(text.encode())
    assert root.tag == "testsuites" and root.get("tests") == "6" and root.get("failures") == "2" and root.get("errors") == "1"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["ann", "ben", "=cmd|' /C calc'!A0"]
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


def test_the_class_pages_of_a_graded_class_come_from_its_results(course, tmp_path):
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    student(cls / "<i>mallory&co")
    from torchgrade.submissions import discover

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
