"""LMS gradebooks: Canvas's and Moodle's import files, checked against each importer's documented rules."""

from __future__ import annotations

import csv
import io
import re

import pytest
from click.testing import CliRunner

from torchgrade.cli import main
from torchgrade.engine.config import load_assignment
from torchgrade.outputs.lms import LMSError, canvas_csv, lms_ids, moodle_csv, read_roster
from torchgrade.engine.results import write_results
from torchgrade.engine.scoring import CheckResult, Grade

from tiny_course import make_course

NUMBER = re.compile(r"^\d+(\.\d+)?$")


def canvas_rules(text: str) -> list[list[str]]:
    """Canvas's gradebook import ("How do I import grades in the Gradebook?"): the rows, after checking them.

    The header starts Student, ID, SIS User ID, SIS Login ID, Section, then assignment columns; the
    second row is "Points Possible" with a number per assignment; every student row has an ID, SIS
    User ID or SIS Login ID to be found by; a grade is a number or blank (blank changes nothing).
    """
    rows = list(csv.reader(io.StringIO(text)))
    header, points, students = rows[0], rows[1], rows[2:]
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] and len(header) > 5
    assert points[0].strip() == "Points Possible" and points[1:5] == ["", "", "", ""]
    assert all(NUMBER.match(p) for p in points[5:])
    for row in students:
        assert len(row) == len(header)
        assert any(row[1:4]), row  # findable
        assert all(g == "" or NUMBER.match(g) for g in row[5:]), row
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in row)
    return rows


def moodle_rules(text: str, max_grade: float) -> list[list[str]]:
    """Moodle's grade import ("Grade import", CSV): the rows, after checking them.

    A header row; a column Moodle can map users by (email address, ID number, username), non-empty
    and unique per row; a grade column of numbers within the grade item's range.
    """
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    assert header[0] in ("Email address", "ID number", "Username") and len(header) == 2
    ids = [r[0] for r in body]
    assert all(ids) and len(set(ids)) == len(ids)
    assert all(NUMBER.match(r[1]) and 0 <= float(r[1]) <= max_grade for r in body)
    return rows


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return load_assignment(make_course(tmp_path_factory.mktemp("course")))


def graded(name: str, score: float, top: float = 5.0) -> Grade:
    check = CheckResult(nodeid="n", name="tensors.one_hot: a", exercise="tensors", target="one_hot", device="cpu",
                        visibility="visible", status="passed" if score else "failed", score=score, max_score=top)
    return Grade(name, [check], devices=["cpu"])


CANVAS_ROSTER = """\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,HW1 (771)
    Points Possible,,,,,10
"Doe, Jane",12345,S001,jdoe,Section A,
"Roe, Richard",12346,S002,rroe,Section A,
"Poe, Edgar",12347,S003,epoe,Section B,
"=Evil, Eve",12348,S004,eve,Section B,
"""


def test_ids_are_read_from_canvas_and_moodle_download_names():
    assert lms_ids("doejane_12345_67890_tensors.py") == lms_ids("doejane_12345_67890_tensors.py")
    assert lms_ids("doejane_12345_67890_tensors.py").ids == ("doejane_12345_67890_tensors.py", "12345")
    assert lms_ids("doejane_late_12345_67890").ids[1:] == ("12345",)
    assert lms_ids("Jane Doe_1234567_assignsubmission_file_") == \
        type(lms_ids("x"))(("Jane Doe_1234567_assignsubmission_file_", "1234567"), "Jane Doe")
    assert lms_ids("Jane Doe (S001)").ids == ("Jane Doe (S001)", "S001")
    assert lms_ids("alice").ids == ("alice",) and lms_ids("alice").person is None


def test_a_canvas_gradebook_follows_canvas_import_rules_and_lists_who_did_not_match(course, tmp_path):
    (tmp_path / "roster.csv").write_text(CANVAS_ROSTER, encoding="utf-8")
    roster = read_roster(tmp_path / "roster.csv")
    grades = [graded("doejane_12345_67890", 5.0),        # Canvas ID in a Canvas download name
              graded("rroe", 2.5),                        # SIS Login ID as the folder name
              graded("mallory", 1.0),                     # nobody
              graded("=Evil Eve (S004)", 0.0)]            # SIS User ID at the end of the name
    text, matching = canvas_csv(grades, course, roster, column="HW1 (771)")
    rows = canvas_rules(text)
    assert rows[0][5] == "HW1 (771)" and rows[1][5] == "5"
    by_id = {r[1]: r for r in rows[2:]}
    assert by_id["12345"][0] == "Doe, Jane" and by_id["12345"][4] == "Section A" and by_id["12345"][5] == "5"
    assert by_id["12346"][5] == "2.5" and by_id["12348"][5] == "0" and by_id["12348"][0] == "'=Evil, Eve"
    assert by_id["12347"][5] == ""  # no submission: blank, which leaves Canvas's gradebook as it is
    assert [r["Student"] for r in matching.missing] == ["Poe, Edgar"]
    assert [name for name, _ in matching.unmatched] == ["mallory"]


def test_a_canvas_gradebook_needs_no_roster_when_the_names_are_canvas_downloads(course):
    text, matching = canvas_csv([graded("doejane_12345_67890", 3.0), graded("alice", 1.0)], course, None)
    rows = canvas_rules(text)
    assert [(r[0], r[1], r[5]) for r in rows[2:]] == [("doejane", "12345", "3")]
    assert rows[0][5] == course.title
    assert [name for name, _ in matching.unmatched] == ["alice"]


MOODLE_ROSTER = """First name,Last name,ID number,Institution,Department,Email address,Assignment: HW1 (Real)
Jane,Doe,,,,jane@example.org,-
Richard,Roe,,,,rich@example.org,-
Jane,Doe-Smith,,,,jds@example.org,-
"""


def test_a_moodle_gradebook_follows_moodle_import_rules(course, tmp_path):
    (tmp_path / "roster.csv").write_text(MOODLE_ROSTER)
    roster = read_roster(tmp_path / "roster.csv")
    grades = [graded("Jane Doe_1234567_assignsubmission_file_", 4.0),  # by the name in Moodle's download
              graded("rich@example.org", 5.0),                           # by email
              graded("Nobody Here_7654321_assignsubmission_file_", 1.0)]
    text, matching = moodle_csv(grades, course, roster)
    rows = moodle_rules(text, 5.0)
    assert rows == [["Email address", course.title], ["jane@example.org", "4"], ["rich@example.org", "5"]]
    assert [r["Email address"] for r in matching.missing] == ["jds@example.org"]
    assert matching.unmatched == [("Nobody Here_7654321_assignsubmission_file_",
                                   "no roster row has an ID in its name or the name 'Nobody Here'")]


def test_a_submission_matching_two_students_is_listed_not_guessed(course, tmp_path):
    roster = [{"Student": "Doe, Jane", "ID": "1"}, {"Student": "Doe, Jane", "ID": "2"}]
    _, matching = canvas_csv([graded("Doe Jane (x)", 1.0)], course, roster)
    assert matching.unmatched and "matches 2 roster rows" in matching.unmatched[0][1]


def test_a_roster_without_an_identifying_column_is_refused(course):
    with pytest.raises(LMSError, match="none of the columns Moodle maps users by"):
        moodle_csv([graded("a", 1.0)], course, [{"Name": "a"}])
    with pytest.raises(LMSError, match="none of the columns Canvas finds students by"):
        canvas_csv([graded("a", 1.0)], course, [{"Name": "a"}])


def test_export_writes_the_file_and_exits_1_listing_unmatched_submissions(course, tmp_path):
    out = tmp_path / "out"
    for g in (graded("doejane_12345_67890", 5.0), graded("mallory", 1.0)):
        write_results(g, course, out / g.submission / "results.json")
    (tmp_path / "roster.csv").write_text(CANVAS_ROSTER)
    result = CliRunner().invoke(main, ["export", "canvas", str(out), "--roster", str(tmp_path / "roster.csv"),
                                       "-o", str(tmp_path / "canvas.csv"), "--assignment", str(course.path)])
    assert result.exit_code == 1, result.output
    assert "unmatched: mallory: no roster row has an ID in its name" in result.output
    assert "no submission: Roe, Richard" in result.output
    canvas_rules((tmp_path / "canvas.csv").read_text())
    result = CliRunner().invoke(main, ["export", "moodle", str(out), "-o", str(tmp_path / "m.csv"),
                                       "--assignment", str(course.path)])
    assert result.exit_code == 2 and "moodle needs --roster" in result.output
