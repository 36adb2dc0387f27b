"""Grading a class: skip what is already graded, grade the rest anywhere, record each as it completes.

`grade_class` is the whole `torchgrade grade` run. It hashes each submission, asks the ledger
(torchgrade.classroom.ledger) which are already graded by this grader, hands the rest to an executor
(torchgrade.classroom.executors: this process, a local pool, Dask), and for each grade that comes back writes
results.json and report.html, then appends the ledger record. The class pages (index.html,
grades.csv, junit.xml) are written at the end from every submission's grade.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import quote

from torchgrade.engine.config import Assignment, load_assignment
from torchgrade.outputs.exports import grades_csv, junit_xml, load_grade
from torchgrade.engine.grading import GradingError
from torchgrade.classroom.ledger import Ledger, Record
from torchgrade.engine.fingerprint import grader_key
from torchgrade.engine.notebooks import module_names, prepare as prepare_notebooks
from torchgrade.base.printable import shown
from torchgrade.outputs.report import write_report
from torchgrade.engine.results import INSTRUCTOR_FOLDER, write_atomic, write_results
from torchgrade.engine.scoring import CheckResult, Grade, assign_points
from torchgrade.classroom.submissions import Submission, SubmissionUnreadable, content_hash, staged

#: What a grade's rows say when the grader itself failed on a submission (not the student's fault).
GRADER_FAILED = "grader error (not your fault; please report it): {why}"


def error_grade(name: str, assignment: Assignment, why: str, what: str = "submission could be graded") -> Grade:
    """A grade in which every target errors, with the reason (unreadable zip, a grading process that died)."""
    tests = [CheckResult(nodeid=t.qualname, name=f"{t.qualname}: {what}", exercise=t.exercise,
                         target=t.name, device=None, visibility="visible", status="error", output=why)
             for t in assignment.targets]
    assign_points(tests, assignment)
    return Grade(submission=name, tests=tests, output=why)


def unreadable(submission: Submission, assignment: Assignment, why: str) -> Grade:
    """A grade for a submission that could not even be unpacked: every target errors, with the reason."""
    return error_grade(submission.name, assignment, why, "submission could be read")


# --- one worker process: a session per (assignment, device, selection), reused for every submission ---

_lock = threading.Lock()  # a session grades one submission at a time (Dask may run tasks in threads)


def grade_one(submission: Submission, assignment: Assignment, device: str = "all", only: tuple[str, ...] = ()) -> Grade:
    """Grade one submission (folder or zip) in this process, with checks collected once per process.

    An unreadable zip becomes a grade of error rows; so does an unexpected failure of the grader on
    this one submission (the next one gets a fresh session). GradingError (the checks cannot run at
    all) is raised.
    """
    from torchgrade.engine.session import forget, shared  # (imports torch: not for the parent of a pool)

    names = module_names(assignment)
    with _lock:
        try:
            with staged(submission, names) as stage:
                stage.notes += prepare_notebooks(stage.folder, assignment)  # <module>.ipynb: its <module>.py
                grade = shared(assignment, device, only).grade(stage.folder)
            if stage.notes:  # where the files were found, links left out: the student sees why
                grade.output = "\n".join([*stage.notes, grade.output]).strip()
        except SubmissionUnreadable as e:
            grade = unreadable(submission, assignment, str(e))
        except GradingError:
            raise
        except Exception as e:
            forget(assignment, device, only)
            grade = error_grade(submission.name, assignment, GRADER_FAILED.format(why=f"{type(e).__name__}: {e}"))
            grade.isolation = _level()  # the level this process grades at, never the default's
    grade.submission = submission.name
    return grade


def _level() -> str:
    from torchgrade.sandbox import host, isolation

    try:
        return host.isolation_level(isolation.requested_level())
    except Exception:  # (no level to name: the grade's own default says "process", the weakest)
        return "process"


_shared: set[str] = set()  # the reference recordings this process has taken in


def share_reference(recording: Path, assignment: Assignment, device: str, only: tuple[str, ...]) -> None:
    """The reference side of every check, computed once for the whole class: the first worker process
    to get here records it (a round of the checks on the reference alone), the others wait for it and
    take it in. A check that asks for something not recorded computes it, as without a recording."""
    if str(recording) in _shared:
        return
    _shared.add(str(recording))
    import fcntl

    from torchgrade.engine.differential import adopt_reference_outcomes, recording as recording_outcomes
    from torchgrade.engine.session import shared
    from torchgrade.sandbox import wire

    with open(recording.with_suffix(".lock"), "w") as lock:
        # A POSIX lock, not flock: the data-parallel ranks that recording forks (and keeps) would
        # inherit a flock and hold it for as long as they live.
        fcntl.lockf(lock, fcntl.LOCK_EX)
        if not recording.exists():
            try:
                with recording_outcomes(reference_only=True) as recorded:
                    shared(assignment, device, only).grade(assignment.reference_dir)
                partial = recording.with_suffix(".partial")
                partial.write_bytes(wire.encode(recorded))
                os.replace(partial, recording)  # a worker that dies while writing leaves no half recording
            except Exception:  # each worker computes what it needs, as without a recording
                return
        with contextlib.suppress(OSError, wire.WireError):
            adopt_reference_outcomes(assignment.reference_dir, wire.decode(recording.read_bytes()))


@dataclass(frozen=True)
class GradeJob:
    """Grades one submission wherever it runs (this process, a pool worker, a Dask worker); picklable."""

    assignment_path: str
    device: str = "all"
    only: tuple[str, ...] = ()
    #: Where the workers of one machine share the reference side (see `share_reference`), if they do.
    reference_recording: str | None = None

    def __call__(self, submission) -> Grade:
        assignment = load_assignment(self.assignment_path)
        if self.reference_recording:
            with _lock:
                share_reference(Path(self.reference_recording), assignment, self.device, self.only)
        data = getattr(submission, "data", None)
        if data is None:
            return grade_one(submission, assignment, self.device, self.only)
        with tempfile.TemporaryDirectory(prefix="torchgrade-task-") as tmp:  # a packed submission (Dask)
            path = Path(tmp) / f"{submission.name}.zip"
            path.write_bytes(data)
            return grade_one(Submission(submission.name, path), assignment, self.device, self.only)


# --- outputs ---

class OutputError(Exception):
    """--out cannot be written (not writable, under a file, a full disk): one line for the instructor."""


def describe_os_error(out: Path, error: OSError, aliases: dict[str, str] | None = None) -> str:
    """One line for an OSError met while writing --out (`aliases`: a private path by the path it stands for)."""
    where = str(error.filename or out)
    for private, public in (aliases or {}).items():
        where = where.replace(private, public)
    return (f"cannot write {where}: {error.strerror or error} (--out {out}; every submission graded before "
            f"is recorded there: fix this and run the same command to grade the rest)")


@contextlib.contextmanager
def writing(out: Path, aliases: dict[str, str] | None = None) -> Iterator[None]:
    """Turn an OSError met while writing into --out into an OutputError of one line."""
    try:
        yield
    except OSError as e:
        raise OutputError(describe_os_error(out, e, aliases)) from None


def student_folder(out: Path, name: str) -> Path:
    """DIR/<name>, refused unless it is a folder directly inside DIR (names come from student files)."""
    folder = out / name
    # realpath: a name that is a link already in DIR (to anywhere, DIR itself included) is refused too
    if name in ("", ".", "..") or folder.parent != out or folder.is_symlink() \
            or os.path.dirname(os.path.realpath(folder)) != os.path.realpath(out):
        raise OutputError(f"refusing to write {name!r}: not a folder inside --out {out}")
    return folder


#: The most of one module's text kept for `torchgrade similarity` (a module larger than this is cut).
MAX_KEPT_CODE = 1 << 20


def kept_code(submission: Submission, assignment: Assignment) -> dict[str, str]:
    """The submission's exercise modules as text, for DIR/<submission>/instructor/code/ (torchgrade/classroom/similarity.py);
    nothing where it cannot be staged (its grade says why)."""
    names = tuple(e.name for e in assignment.exercises)
    code = {}
    try:
        with staged(submission, names) as stage:
            for name in names:
                path = stage.folder / f"{name}.py"
                if path.is_file() and not path.is_symlink():
                    with open(path, "rb") as f:
                        code[name] = f.read(MAX_KEPT_CODE).decode("utf-8", errors="replace")
    except (SubmissionUnreadable, OSError):
        return {}
    return code


def write_outputs(grade: Grade, assignment: Assignment, out: Path, code: dict[str, str] | None = None) -> None:
    """DIR/<submission>/results.json and report.html, both or neither: written into a hidden folder
    first, then put in place by a rename (no name of a student starts with a dot). `code`: the student's
    modules, kept in the instructor's folder (None: keep those already there)."""
    from torchgrade.classroom.similarity import CODE_FOLDER

    folder = student_folder(out, grade.submission)
    partial, old = out / f".{grade.submission}.partial", out / f".{grade.submission}.old"
    with writing(out, {str(partial): str(folder)}):
        moved = False  # the previous results are set aside, and must come back if the new ones don't go in
        try:
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            write_results(grade, assignment, partial / "results.json")
            write_report(grade, assignment, partial / "report.html")
            # The instructor's copy: hidden checks' messages and what was printed during them.
            private = partial / INSTRUCTOR_FOLDER
            private.mkdir(mode=0o700)
            write_results(grade, assignment, private / "results.json", instructor=True)
            write_report(grade, assignment, private / "report.html", instructor=True)
            before = folder / INSTRUCTOR_FOLDER / CODE_FOLDER
            if code is None and before.is_dir() and not before.is_symlink():
                shutil.copytree(before, private / CODE_FOLDER, symlinks=True)
            elif code:
                (private / CODE_FOLDER).mkdir()
                for name, text in code.items():
                    write_atomic(private / CODE_FOLDER / f"{name}.py", text)
            shutil.rmtree(old, ignore_errors=True)
            if folder.exists():
                os.rename(folder, old)
                moved = True
            os.rename(partial, folder)
            moved = False
        finally:
            if moved:
                with contextlib.suppress(OSError):
                    os.rename(old, folder)
            shutil.rmtree(partial, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)


def report_link(name: str) -> str:
    """The link from index.html to a student's report: the name URL-encoded (a#1, 50%off)."""
    return f"{quote(name, safe='')}/report.html"


def write_class_pages(grades: list[Grade], assignment: Assignment, out: Path) -> None:
    """DIR/index.html (class overview), DIR/grades.csv (gradebook) and DIR/junit.xml (for CI)."""
    from torchgrade.classroom.similarity import PAGE
    from torchgrade.outputs.overview import render_index

    grades = sorted(grades, key=lambda g: g.submission)
    links = {g.submission: report_link(g.submission) for g in grades}
    similarity = PAGE if (out / PAGE).is_file() else None
    with writing(out):
        write_atomic(out / "index.html", render_index(grades, assignment, links, similarity))
        write_atomic(out / "grades.csv", grades_csv(grades, assignment))
        write_atomic(out / "junit.xml", junit_xml(grades))


def _record(name: str, content: str, key: str, grade: Grade) -> Record:
    per: dict[str, float] = {}
    for t in grade.tests:
        per[t.exercise] = round(per.get(t.exercise, 0.0) + t.duration, 4)
    return Record(name=name, content=content, grader=key, score=grade.score, max_score=grade.max_score,
                  errors=sum(t.status == "error" for t in grade.tests), seconds=grade.execution_time,
                  exercise_seconds=per)


def _outcomes(executor, job: GradeJob, todo: list[Submission], assignment: Assignment):
    """The executor's outcomes; a refused submission (a link out of the class) is graded here, as errors."""
    for s in todo:
        if s.refused:
            yield s, unreadable(s, assignment, s.refused)
    yield from executor.run(job, [s for s in todo if not s.refused])


class OutputBusy(Exception):
    """Another torchgrade run is writing to the same output folder."""


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold DIR/.torchgrade.lock while writing DIR, so two runs never interleave their records."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        with writing(out):
            out.mkdir(parents=True, exist_ok=True)
        yield
        return
    with writing(out):  # before anything is graded: an unwritable --out is one line, not a lost run
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(out / ".torchgrade.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputBusy(f"{out}: another torchgrade run is writing there") from None
        yield
    finally:
        os.close(fd)


@dataclass
class BatchResult:
    """What a run did: every submission's grade (name order), which were graded now or skipped, how long."""

    grades: list[Grade] = field(default_factory=list)
    graded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    seconds: float = 0.0


def grade_class(submissions: list[Submission], assignment: Assignment, out: Path, *, executor=None,
                device: str = "all", only: tuple[str, ...] = (), force: bool = False,
                on_start: Callable[[int, int], None] | None = None,
                on_grade: Callable[[Grade, Record], None] | None = None, overrides=None) -> BatchResult:
    """Grade every submission not already graded into `out` (resumable), then write the class pages.

    `on_start(to_grade, skipped)` and `on_grade(grade, record)` report progress. The instructor's decisions
    (`overrides`, default: DIR/overrides.yaml; torchgrade/classroom/overrides.py) are applied to every grade, new or
    resumed, before anything of it is written.
    """
    from torchgrade.classroom.executors.local import InProcess
    from torchgrade.classroom.overrides import Overrides

    if overrides is None:
        overrides = Overrides.load(out, assignment, [s.name for s in submissions])

    started = time.perf_counter()
    executor = executor or InProcess()
    key = grader_key(assignment, device=device, only=only)
    ledger = Ledger(out)
    with writing(out):
        known = {} if force else ledger.load()
    hashes = {s.name: content_hash(s) for s in submissions}
    result = BatchResult()
    done: dict[str, tuple[Grade, Record]] = {}
    todo: list[Submission] = []
    for s in submissions:
        record = known.get(s.name)
        if record is not None and record.content == hashes[s.name] and record.grader == key \
                and not record.content.startswith("unreadable:"):
            try:
                grade = load_grade(student_folder(out, s.name) / "results.json")
            except Exception:  # noqa: BLE001  the record's files are gone or damaged: grade again
                pass
            else:
                before = grade.adjustments
                overrides.apply(grade, record.content)
                if grade.adjustments != before:  # the decisions changed since: the student's pages follow
                    write_outputs(grade, assignment, out)
                done[s.name] = (grade, record)
                result.skipped.append(s.name)
                continue
        todo.append(s)
    if on_start:
        on_start(len(todo), len(result.skipped))
    # A pool's workers share the reference side through a private folder (not DIR, which may be published).
    shares = getattr(executor, "shares_files", False)
    with tempfile.TemporaryDirectory(prefix="torchgrade-reference-") if shares else contextlib.nullcontext() as folder:
        job = GradeJob(str(assignment.path), device, tuple(only),
                       str(Path(folder) / "reference.msgpack") if folder else None)
        for s, outcome in _outcomes(executor, job, todo, assignment):
            if isinstance(outcome, Grade):
                grade = outcome
                grade.submission = s.name
            else:
                grade = error_grade(s.name, assignment, GRADER_FAILED.format(why=outcome.why))
                result.crashed.append(s.name)
            overrides.apply(grade, hashes[s.name])
            code = kept_code(s, assignment) if not s.refused else {}
            try:
                write_outputs(grade, assignment, out, code)
            except (ValueError, TypeError, RecursionError) as e:  # (OSError: --out itself; OutputError says so)
                # What this student's grade holds cannot be written: their error rows, and the class goes on.
                grade = error_grade(s.name, assignment, GRADER_FAILED.format(
                    why=f"the results could not be written ({type(e).__name__}: {shown(str(e))[:300]})"))
                result.crashed.append(s.name)
                overrides.apply(grade, hashes[s.name])
                write_outputs(grade, assignment, out, code)
            record = _record(s.name, hashes[s.name], key, grade)
            with writing(out):
                ledger.append(record)
            done[s.name] = (grade, record)
            result.graded.append(s.name)
            if on_grade:
                on_grade(grade, record)
    # One record per submission of this run, in order: the ledger is the index of DIR.
    result.records = [done[s.name][1] for s in submissions]
    with writing(out):
        ledger.rewrite(result.records)
        overrides.remember()
    result.grades = [done[s.name][0] for s in submissions]
    if len(result.grades) > 1:
        write_class_pages(result.grades, assignment, out)
    result.seconds = time.perf_counter() - started
    return result
