"""Real class folders (tests/class_folders.py): every student found, graded once, under one name of their own."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from torchgrade.classroom.batch import OutputError, grade_class, report_link, student_folder
from torchgrade.cli import main
from torchgrade.engine.config import load_assignment
from torchgrade.classroom.submissions import Submission, discover, safe_name, staged, survey

from class_folders import ARCHIVES, LAYOUTS, REFERENCE, STUB, write, zip_of
from tiny_course import FULL_MARKS, ROOT, make_course, student


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return load_assignment(make_course(tmp_path_factory.mktemp("course")))


def grade_text(out: Path, name: str) -> str:
    data = json.loads((out / name / "results.json").read_text())
    return "\n".join([data.get("output", ""), *(t.get("output", "") for t in data["tests"])])


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_grades_each_student_once_under_their_own_name(course, tmp_path, layout):
    cls = tmp_path / "class"
    cls.mkdir()
    expected = LAYOUTS[layout](cls)
    out = tmp_path / "out"
    found = survey([cls], ("tensors",), out)
    for word in expected.notes:
        assert any(word in note for note in found.notes), (word, found.notes)

    result = grade_class(found.submissions, course, out, device="cpu")
    assert {g.submission: g.score for g in result.grades} == expected.scores
    # one folder per student, every one of them directly inside --out
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(expected.scores)
    assert not [p for p in tmp_path.iterdir() if p.name not in ("class", "out") and not p.name.startswith("src-")]
    for name, words in expected.outputs.items():
        text = grade_text(out, name)
        for word in words:
            assert word in text, (name, word, text)
    # nothing of it resolved into the course: no student's staged files are the reference's but by copy
    again = grade_class(survey([cls], ("tensors",), out).submissions, course, out, device="cpu")
    assert again.graded == [] and sorted(again.skipped) == sorted(expected.scores)


def test_links_in_index_html_are_url_encoded_and_lead_to_each_report(course, tmp_path):
    cls = tmp_path / "class"
    cls.mkdir()
    LAYOUTS["own_file_names"](cls)
    out = tmp_path / "out"
    grade_class(discover([cls], ("tensors",), out), course, out, device="cpu")
    page = (out / "index.html").read_text()
    hrefs = re.findall(r'href="([^"]+/report\.html)"', page)
    assert 'href="a%231/report.html"' in page and 'href="50%25off/report.html"' in page
    assert len(hrefs) == 8
    for href in hrefs:
        assert (out / unquote(href)).is_file(), href
    # torchgrade's own files are still its own
    assert (out / "ledger.jsonl").is_file() and (out / "grades.csv").is_file() and (out / "index.html").is_file()
    assert report_link("../x") == "..%2Fx/report.html"


@pytest.mark.parametrize("raw, safe", [
    ("alice", "alice"), ("..", "unnamed"), ("", "unnamed"), (".hidden", "hidden"), ("a/b", "a_b"),
    ("a\\b", "a_b"), ("tab\there", "tab_here"), ("Full Name_12345", "Full Name_12345"), ("x. ", "x"),
    ("a#1", "a#1"), ("50%off", "50%off"), ("x" * 300, "x" * 150), ("é" * 100, "é" * 75),
    ("cafe\u0301", "café"), (os.fsdecode(b"caf\xe9"), "caf\ufffd"), (".. ..", "unnamed"),
])
def test_a_safe_name_never_leaves_its_folder(raw, safe):
    assert safe_name(raw) == safe


def test_any_file_name_gives_one_folder_directly_inside_out(tmp_path):
    import random

    rng = random.Random(13)
    alphabet = "./\\ \t\n\x00#%?&é\u0301\udcff~$*:" + "ab"
    for _ in range(2000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        name = safe_name(raw)
        assert student_folder(tmp_path, name).parent == tmp_path, (raw, name)
        name.encode("utf-8")  # writable into JSON and HTML


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "../escape"])
def test_an_output_folder_outside_out_is_refused(tmp_path, name):
    with pytest.raises(OutputError):
        student_folder(tmp_path, name)


def test_an_output_folder_that_is_a_link_is_refused(tmp_path):
    os.symlink(tmp_path.parent, tmp_path / "alice")
    with pytest.raises(OutputError):
        student_folder(tmp_path, "alice")


def test_names_are_the_same_whatever_the_order_the_file_system_lists(tmp_path, monkeypatch):
    cls = tmp_path / "class"
    cls.mkdir()
    LAYOUTS["colliding_names"](cls)
    first = [(s.name, s.source) for s in discover([cls], ("tensors",))]
    real_iterdir = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: reversed(list(real_iterdir(self))))
    assert [(s.name, s.source) for s in discover([cls], ("tensors",))] == first


def test_a_repository_given_as_path_is_named_after_its_folder(tmp_path, monkeypatch):
    repos = []
    for name in ("hw1-alice", "hw1-bob"):
        repo = tmp_path / name
        write(repo / ".git" / "HEAD", "ref: refs/heads/main\n")
        write(repo / "exercises" / "tensors.py", REFERENCE)
        repos.append(repo)
    plain = tmp_path / "carol"
    write(plain / "exercises" / "tensors.py", REFERENCE)  # no .git: its work in exercises/ all the same
    assert [s.name for s in discover([*repos, plain], ("tensors",))] == ["hw1-alice", "hw1-bob", "carol"]
    monkeypatch.chdir(repos[0])
    assert [s.name for s in discover([Path(".")], ("tensors",))] == ["hw1-alice"]


def test_a_submission_with_a_backup_zip_or_a_sub_folder_stays_one_submission(tmp_path):
    exercises = ("tensors", "autograd", "data")
    alice = tmp_path / "alice"
    for name in exercises:
        write(alice / f"{name}.py", REFERENCE)
    zip_of(alice / "backup.zip", {"tensors.py": STUB})
    write(alice / "old" / "tensors.py", STUB)
    assert [s.name for s in discover([alice], exercises)] == ["alice"]
    # while one stray exercise file beside two students' folders is the class's, not a student
    for name in ("bob", "carol"):
        write(tmp_path / "class" / name / "tensors.py", REFERENCE)
    write(tmp_path / "class" / "tensors.py", REFERENCE)
    assert [s.name for s in discover([tmp_path / "class"], exercises)] == ["bob", "carol"]


def test_nothing_staged_resolves_into_the_course(tmp_path):
    cls = tmp_path / "class"
    cls.mkdir()
    LAYOUTS["links"](cls)
    course = str(ROOT)
    for s in discover([cls], ("tensors",)):
        if s.refused:
            assert "link" in s.refused
            continue
        with staged(s, ("tensors",)) as stage:
            for path in stage.folder.rglob("*"):
                assert not path.is_symlink()
                assert not os.path.realpath(path).startswith(course + os.sep), path


def test_the_output_folder_inside_the_class_is_skipped_with_a_note(course, tmp_path):
    cls = tmp_path / "class"
    student(cls / "alice", "reference")
    student(cls / "bob", "stub")
    out = cls / "reports"
    args = ["grade", str(cls), "--out", str(out), "--device", "cpu", "--assignment", str(course.path),
            "--no-progress"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(main, args)
    assert second.exit_code == 0, second.output
    assert "reports: skipped, it is the output folder --out" in second.output
    assert "graded 0, skipped 2 already graded, 2 in the class" in second.output
    # and an earlier output folder by another name is no student either
    third = CliRunner().invoke(main, [*args[:3], str(tmp_path / "elsewhere"), *args[4:]])
    assert third.exit_code == 0, third.output
    assert "it is an output folder of torchgrade" in third.output
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir() if p.is_dir()) == ["alice", "bob"]
    # --out inside a student's folder: the student is graded, without it
    inside = [*args[:3], str(cls / "alice" / "out"), *args[4:]]
    for run in range(2):
        result = CliRunner().invoke(main, inside)
        assert result.exit_code == 0, result.output
        assert f"graded {2 - 2 * run}, skipped {2 * run} already graded, 2 in the class" in result.output


@pytest.mark.parametrize("kind", sorted(ARCHIVES))
def test_an_archive_that_cannot_be_unpacked_is_that_students_error_rows_with_what_to_do(course, tmp_path, kind):
    make, words = ARCHIVES[kind]
    cls = tmp_path / "class"
    student(cls / "alice", "reference")
    make(cls / "bob.zip")
    out = tmp_path / "out"
    result = grade_class(discover([cls], ("tensors",)), course, out, device="cpu")
    scores = {g.submission: g.score for g in result.grades}
    assert scores == {"alice": FULL_MARKS, "bob": 0.0}
    bob = next(g for g in result.grades if g.submission == "bob")
    assert {t.status for t in bob.tests} == {"error"}
    for word in words:
        assert word in bob.tests[0].output, bob.tests[0].output
    assert "not your fault" not in bob.tests[0].output  # the student's to fix, not a grader error


def test_an_archive_given_on_the_command_line_that_is_damaged_exits_2(tmp_path):
    path = ARCHIVES["truncated"][0](tmp_path / "alice.zip")
    result = CliRunner().invoke(main, ["grade", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "cannot read this zip file" in result.output
    assert not (tmp_path / "out").exists()


def test_a_zip_never_unpacks_outside_its_folder(tmp_path):
    path = zip_of(tmp_path / "mallory.zip", {"../../escaped.py": "x", "/abs.py": "x", "C:\\win.py": "x",
                                             "ok/tensors.py": REFERENCE})
    with staged(Submission("mallory", path), ("tensors",)) as stage:
        root = stage.folder.parent
        names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        assert names == ["ok/tensors.py"]
        assert sum("points outside the zip" in n for n in stage.notes) == 3
    assert not list(tmp_path.parent.rglob("escaped.py")) and not Path("/abs.py").exists()


def test_a_zip_bomb_is_refused_as_that_students_error(tmp_path):
    from torchgrade.classroom.submissions import MAX_UNPACKED_BYTES, SubmissionUnreadable

    path = zip_of(tmp_path / "bomb.zip", {"tensors.py": REFERENCE, "zeros.bin": b"\0" * (MAX_UNPACKED_BYTES + 1)})
    with pytest.raises(SubmissionUnreadable, match="more than"):
        with staged(Submission("bomb", path), ("tensors",)):
            pass


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_packed_submission_stages_as_the_original_does(tmp_path, layout):
    """What a Dask worker gets (the submission as zip bytes) holds what grading here would see."""
    from torchgrade.classroom.submissions import packed

    cls = tmp_path / "class"
    cls.mkdir()
    LAYOUTS[layout](cls)

    def listing(submission):
        with staged(submission, ("tensors",)) as stage:
            return sorted((p.relative_to(stage.folder).as_posix(), p.read_bytes())
                          for p in stage.folder.rglob("*") if p.is_file())

    for s in discover([cls], ("tensors",)):
        if s.refused:
            continue
        copy = tmp_path / "packed" / f"{s.name}.zip"
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(packed(s))
        assert listing(Submission(s.name, copy)) == listing(s), s.name


def test_an_output_folder_inside_a_single_submission_is_not_part_of_it(course, tmp_path, monkeypatch):
    repo = tmp_path / "hw1-alice"
    write(repo / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(repo / "exercises" / "tensors.py", REFERENCE)
    monkeypatch.chdir(repo)
    args = ["grade", ".", "--out", "reports", "--device", "cpu", "--assignment", str(course.path), "--no-progress"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0 and "hw1-alice: 5 / 5" in first.output, first.output
    second = CliRunner().invoke(main, args)  # its results are no new version of the student's work
    assert second.exit_code == 0 and "graded 0, skipped 1 already graded" in second.output, second.output


@pytest.mark.parametrize("jobs", [1, 2])
def test_any_bytes_in_any_name_never_stop_a_class(course, tmp_path, jobs):
    """`torchgrade grade` on a class whose names are not UTF-8, hold control characters or are as long as
    a name can be (inside submissions, as submissions): every student graded, every file torchgrade
    writes is UTF-8 and parses, and a re-run finds everything graded (once, such a name stopped the run
    at the first writer and every re-run at the same place)."""
    import subprocess
    import sys
    import xml.etree.ElementTree as ET

    cls = tmp_path / "class"
    cls.mkdir()
    expected = LAYOUTS["any_bytes_in_names"](cls)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "torchgrade.cli", "grade", str(cls), "--out", str(out), "-j", str(jobs),
            "--device", "cpu", "--assignment", str(course.path)]
    first = subprocess.run(args, capture_output=True, timeout=600, check=False)
    assert first.returncode == 0, first.stderr.decode(errors="replace")[-3000:]
    assert b"\x1b" not in first.stdout + first.stderr  # no name of a student's drives the terminal
    for name, score in expected.scores.items():
        assert json.loads((out / name / "results.json").read_bytes().decode("utf-8"))["score"] == score, name
        (out / name / "report.html").read_bytes().decode("utf-8")
    (out / "index.html").read_bytes().decode("utf-8")
    assert len((out / "grades.csv").read_bytes().decode("utf-8").splitlines()) == len(expected.scores) + 1
    assert len(ET.fromstring((out / "junit.xml").read_bytes()).findall("testsuite")) == len(expected.scores)
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_bytes().decode("utf-8").splitlines()]
    assert sorted(r["name"] for r in ledger) == sorted(expected.scores)

    again = subprocess.run(args, capture_output=True, timeout=600, check=False)
    assert again.returncode == 0, again.stderr.decode(errors="replace")[-3000:]
    assert f"graded 0, skipped {len(expected.scores)} already graded".encode() in again.stdout, again.stdout[-2000:]


def test_a_grade_that_cannot_be_written_is_that_students_error_rows_and_the_class_goes_on(course, tmp_path,
                                                                                        monkeypatch):
    import torchgrade.classroom.batch as batch

    cls = tmp_path / "class"
    for name in ("alice", "bob", "carol"):
        student(cls / name, "reference")
    real = batch.write_results

    def fussy(grade, assignment, path, **kwargs):
        if grade.submission == "bob" and any(t.status == "passed" for t in grade.tests):
            raise ValueError("a value no writer takes")
        return real(grade, assignment, path, **kwargs)

    monkeypatch.setattr(batch, "write_results", fussy)
    out = tmp_path / "out"
    result = grade_class(discover([cls], ("tensors",), out), course, out, device="cpu")
    assert {g.submission: g.score for g in result.grades} == {"alice": FULL_MARKS, "bob": 0.0, "carol": FULL_MARKS}
    assert "the results could not be written (ValueError: a value no writer takes)" in grade_text(out, "bob")
    assert result.crashed == ["bob"]
