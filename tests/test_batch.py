"""Class grading: a persistent session grades like a fresh one, a pool survives a dead worker, bad input exits 2."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchgrade.classroom.batch import GradeJob, grade_class
from torchgrade.cli import main
from torchgrade.engine.config import load_assignment
from torchgrade.classroom.executors import Crashed
from torchgrade.classroom.executors.local import DIED, InProcess, Pool
from torchgrade.engine.grading import grade_submission
from torchgrade.classroom.progress import Progress
from torchgrade.engine.session import CheckSession
from torchgrade.classroom.submissions import Submission, discover

from conftest import ROOT
from tiny_course import FULL_MARKS, copy_class, make_course, student, zipped


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return load_assignment(make_course(tmp_path_factory.mktemp("course")))


def rows(grade):
    return [(t.name, t.status, round(t.score, 6), round(t.max_score, 6), t.output) for t in grade.tests]


def test_a_persistent_session_grades_each_round_as_a_fresh_pytest_session_would(course, tmp_path):
    wrong = student(tmp_path / "wrong", extra="""
        def broadcast_shape(a, b):
            return (1,)
    """)
    with CheckSession(course, device="all") as session:
        # reference, then wrong, then stubs, then the reference again: nothing of a round leaks into the next
        scores = []
        for folder in (ROOT / "reference", wrong, ROOT / "exercises", ROOT / "reference"):
            fresh = grade_submission(folder, course, device="all")
            assert rows(session.grade(folder)) == rows(fresh)
            scores.append(fresh.score)
    assert scores == [FULL_MARKS, 3.0, 0.0, FULL_MARKS]


MIXED_CHECKS = '''
import pytest
import torch


@pytest.mark.target("one_hot")
def test_needs_a_fixture_of_pytest(check, device, tmp_path):  # through pytest's protocol
    assert tmp_path.is_dir()
    check(torch.tensor([0, 2, 1], device=device), 3)


@pytest.mark.target("one_hot")
def test_skips_itself(check):
    pytest.skip("this check skips itself")


@pytest.mark.target("one_hot")
def test_breaks_in_the_grader(check):
    raise ValueError("a bug in the check")


@pytest.mark.target("one_hot")
def test_asserts_on_what_came_back(check):
    expected, actual = check(torch.tensor([1, 0]), 2)
    assert actual["value"].tolist() == [[0, 1], [1, 0]], "the rows are not one-hot"


@pytest.mark.target("broadcast_shape")
@pytest.mark.parametrize("shapes", [((3, 1), (1, 4)), ((2,), (5, 2))])
def test_parametrized(check, shapes):
    check(*shapes)
'''


def test_checks_run_directly_record_what_pytests_protocol_records(tmp_path):
    """Skips, grader errors, assertions, forbidden calls, parameters, and checks with pytest's own fixtures
    between them: a round of the session (most checks run directly) equals a fresh pytest session."""
    course = load_assignment(make_course(tmp_path / "course"))
    (course.checks_dir / "visible" / "test_tensors.py").write_text(MIXED_CHECKS)
    forbidden = student(tmp_path / "forbidden", extra="""
        def one_hot(labels, num_classes=-1):
            return torch.nn.functional.one_hot(labels, num_classes)
    """)
    with CheckSession(course, device="all") as session:
        for folder in (ROOT / "reference", forbidden, ROOT / "exercises", ROOT / "reference"):
            fresh = grade_submission(folder, course, device="all")
            assert rows(session.grade(folder)) == rows(fresh)
            assert {t.status for t in fresh.tests} >= {"skipped", "error"}


def test_a_class_is_graded_into_per_student_files_class_pages_and_a_ledger(course, tmp_path):
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    zipped(student(tmp_path / "z", "reference"), cls / "carol.zip")
    (cls / "dave.zip").write_bytes(b"not a zip at all")
    student(cls / "erin", extra="""
        import os

        def one_hot(labels, num_classes=-1):
            os._exit(3)
    """)
    out = tmp_path / "out"
    result = grade_class(discover([cls], ("tensors",)), course, out, device="cpu")

    scores = {g.submission: g.score for g in result.grades}
    assert scores == {"alice": FULL_MARKS, "bob": 0.0, "carol": FULL_MARKS, "dave": 0.0, "erin": 2.0}
    for name in scores:
        assert json.loads((out / name / "results.json").read_text())["score"] == scores[name]
        assert (out / name / "report.html").is_file()
    for page in ("index.html", "grades.csv", "junit.xml", "ledger.jsonl"):
        assert (out / page).is_file()
    # the corrupt zip and the crashing one_hot cost only their own rows
    dave = next(g for g in result.grades if g.submission == "dave")
    assert {t.status for t in dave.tests} == {"error"} and "cannot read dave.zip" in dave.tests[0].output
    erin = next(g for g in result.grades if g.submission == "erin")
    assert {t.target for t in erin.tests if t.status == "error"} == {"one_hot"}
    assert any("exited with status 3" in t.output for t in erin.tests)


class DyingJob(GradeJob):
    """A job whose worker process is killed when it grades the submission called `victim`."""

    def __call__(self, submission):
        if submission.name == "cy-dies":
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(submission)


def test_a_pool_grades_as_one_process_does_and_a_dead_worker_costs_only_its_submission(course, tmp_path):
    # two at a time: alice and bob, then cy (who kills the worker) and dan, then eve in a fresh pool
    cls = copy_class({"alice": "reference", "bob": "stub", "cy-dies": "reference", "dan": "stub",
                      "eve": "reference"}, tmp_path / "class")
    submissions = discover([cls], ("tensors",))
    job = DyingJob(str(course.path), "cpu")
    outcomes = dict((s.name, g) for s, g in Pool(2).run(job, submissions))

    assert sorted(outcomes) == ["alice", "bob", "cy-dies", "dan", "eve"]
    assert outcomes["cy-dies"] == Crashed(DIED)
    alone = dict((s.name, g) for s, g in InProcess().run(GradeJob(str(course.path), "cpu"),
                                                         [s for s in submissions if s.name != "cy-dies"]))
    for name, grade in alone.items():
        assert rows(outcomes[name]) == rows(grade)


def test_a_crashed_submission_gets_error_rows_in_its_results(course, tmp_path):
    class Crashing:
        def run(self, job, submissions):
            for s in submissions:
                yield s, Crashed("the grading process was killed by SIGKILL")

    result = grade_class([Submission("alice", student(tmp_path / "alice"))], course, tmp_path / "out",
                         executor=Crashing(), device="cpu")
    assert result.crashed == ["alice"]
    data = json.loads((tmp_path / "out" / "alice" / "results.json").read_text())
    assert data["score"] == 0 and {t["extra_data"]["outcome"] for t in data["tests"]} == {"error"}
    assert all("killed by SIGKILL" in t["output"] for t in data["tests"])


def test_the_grade_command_prints_a_summary(course, tmp_path):
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    result = CliRunner().invoke(main, ["grade", str(cls), "--out", str(tmp_path / "out"), "--device", "cpu",
                                       "--assignment", str(course.path)])
    assert result.exit_code == 0, result.output
    assert "alice: 5 / 5" in result.output and "bob: 0 / 5" in result.output
    assert "graded 2, skipped 0 already graded, 2 in the class" in result.output
    assert "score: mean 2.50, median 2.50 (min 0, max 5) out of 5" in result.output
    assert "errors: 0 submission(s) with error checks" in result.output
    assert "submissions/min" in result.output and "by exercise (s): tensors" in result.output


def test_the_progress_bar_counts_the_submissions_to_grade_with_an_eta(course, tmp_path):
    stream = io.StringIO()
    bar = Progress(stream=stream, enabled=True)
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    grade_class(discover([cls], ("tensors",)), course, tmp_path / "out", device="cpu",
                on_start=bar.start, on_grade=bar.graded)
    bar.close()
    text = stream.getvalue()
    assert "2/2" in text and "<00:00" in text  # done of total, and the time left


def _bad_zip(tmp_path: Path) -> Path:
    path = tmp_path / "broken.zip"
    path.write_bytes(b"PK\x03\x04 truncated")
    return path


@pytest.mark.parametrize("case, args, message", [
    ("missing", lambda t: [str(t / "nope")], "no such file or folder"),
    ("not a submission", lambda t: [str(ROOT / "README.md")], "not a submission"),
    ("unreadable zip", lambda t: [str(_bad_zip(t))], "cannot read this zip file"),
    ("bad shard", lambda t: [str(ROOT / "reference"), "--shard", "0/2"], "shards count from 1"),
    ("shard not i/n", lambda t: [str(ROOT / "reference"), "--shard", "half"], "is not i/n"),
    ("bad assignment", lambda t: [str(ROOT / "reference"), "--assignment", str(t / "missing.yaml")],
     "cannot read assignment file"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case, args, message):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["grade", *args(tmp_path), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not out.exists()


def test_a_second_run_on_the_same_folder_at_once_is_refused(course, tmp_path):
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".torchgrade.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = CliRunner().invoke(main, ["grade", str(student(tmp_path / "alice")), "--out", str(out),
                                           "--assignment", str(course.path)])
    assert result.exit_code == 2
    assert "another torchgrade run is writing there" in result.output


def test_the_reference_side_is_computed_once_and_taken_in_by_every_other_worker(tmp_path, monkeypatch):
    from torchgrade.classroom import batch
    from torchgrade.engine import differential

    assignment = load_assignment(ROOT / "assignment.yaml")
    only = ("tensors.one_hot",)
    recording = tmp_path / "reference.msgpack"
    monkeypatch.setattr(differential, "_reference_outcomes", {})
    monkeypatch.setattr(batch, "_shared", set())
    batch.share_reference(recording, assignment, "cpu", only)  # the first worker: computes and records
    computed = dict(differential._reference_outcomes)
    assert recording.exists() and computed

    def no_computing(*args, **kwargs):
        raise AssertionError("the reference was computed again")

    monkeypatch.setattr(differential, "_reference_outcomes", {})
    monkeypatch.setattr(batch, "_shared", set())
    monkeypatch.setattr(differential, "run_probe", no_computing)
    batch.share_reference(recording, assignment, "cpu", only)  # another worker: takes it in
    assert differential._reference_outcomes.keys() == computed.keys()
    grade = batch.grade_one(Submission("ref", ROOT / "reference"), assignment, "cpu", only)
    assert grade.score == grade.max_score > 0


def test_a_pool_that_shares_the_reference_and_keeps_data_parallel_ranks_grades_to_the_end(tmp_path):
    """The worker that records the reference side forks data-parallel ranks and keeps them: they must
    not keep the other workers waiting (a lock they inherit would)."""
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from torchgrade.classroom.batch import grade_class
from torchgrade.engine.config import load_assignment
from torchgrade.classroom.executors.local import Pool
from torchgrade.classroom.submissions import Submission
assignment = load_assignment(Path({str(ROOT / "assignment.yaml")!r}))
students = [Submission(name, Path({str(ROOT)!r}) / folder) for name, folder in
            (("a", "reference"), ("b", "exercises"), ("c", "reference"), ("d", "reference"))]
result = grade_class(students, assignment, Path({str(tmp_path / "out")!r}), executor=Pool(2), device="cpu",
                     only=("parallel.average_gradients", "tensors.one_hot"))
print(sorted((g.submission, g.score) for g in result.grades))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "[('a', 5.0), ('b', 0.0), ('c', 5.0), ('d', 5.0)]", done.stdout + done.stderr[-2000:]


def test_the_fork_server_collects_the_checks_and_imports_once_for_every_worker_and_stays_one_thread(tmp_path):
    """What every pool worker (and every data-parallel rank it forks) would pay on its own is paid once in
    the fork server; forking from it stays safe only while it has no thread but its own."""
    (tmp_path / "looks.py").write_text("""
import gc, os, sys

def look():
    from torchgrade.engine import session
    sessions = [s for s in session._sessions.values() if s._session is not None]
    fork_server_threads = len(os.listdir(f"/proc/{os.getppid()}/task"))
    collector = gc.isenabled(), gc.get_freeze_count() > 100_000  # imported uncollected, then frozen
    return len(sessions), "torch._dynamo" in sys.modules, fork_server_threads, collector
""")
    script = f"""
import sys
sys.path[:0] = [{str(ROOT)!r}, {str(tmp_path)!r}]
from torchgrade.classroom.executors.local import call_in_fork_server, start_fork_server
from looks import look
start_fork_server({str(ROOT / "assignment.yaml")!r}, "cpu")
print(call_in_fork_server(look), "torch" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.stdout.strip() == "(1, True, 1, (True, True)) False", done.stdout + done.stderr[-2000:]


def test_grading_with_a_pool_checks_the_course_without_importing_torch_in_this_process(course, tmp_path):
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    script = f"""
import sys
from torchgrade.cli import main
sys.argv = ["torchgrade", "grade", {str(cls)!r}, "--out", {str(tmp_path / "out")!r}, "-j", "2", "--device", "cpu",
            "--assignment", {str(course.path)!r}, "--no-progress"]
try:
    main()
finally:
    print("torch imported here:", "torch" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert "torch imported here: False" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "alice: 5 / 5" in done.stdout and "bob: 0 / 5" in done.stdout, done.stdout
