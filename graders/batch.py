"""Grading many submissions: one grade per submission, written as it completes, then class pages."""

from __future__ import annotations

import csv
import io
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Iterator

from .config import Assignment, load_assignment
from .grading import grade_submission
from .report import render_index, write_report
from .results import write_atomic, write_results
from .scoring import CheckResult, Grade, assign_points
from .submissions import Submission, SubmissionUnreadable, unpacked


def grade_one(submission: Submission, assignment: Assignment, device: str = "all") -> Grade:
    """Grade one submission (folder or zip); an unreadable zip becomes a grade of error rows."""
    names = tuple(e.name for e in assignment.exercises)
    try:
        with unpacked(submission, names) as folder:
            grade = grade_submission(folder, assignment, device=device)
    except SubmissionUnreadable as e:
        grade = unreadable(submission, assignment, str(e))
    grade.submission = submission.name
    return grade


def unreadable(submission: Submission, assignment: Assignment, why: str) -> Grade:
    """A grade for a submission that could not even be unpacked: every target errors, with the reason."""
    tests = [CheckResult(nodeid=t.qualname, name=f"{t.qualname}: submission could be read", exercise=t.exercise,
                         target=t.name, device=None, visibility="visible", status="error", output=why)
             for t in assignment.targets]
    assign_points(tests, assignment)
    return Grade(submission=submission.name, tests=tests, output=why)


def write_outputs(grade: Grade, assignment: Assignment, out: Path) -> None:
    """DIR/<submission>/results.json and report.html."""
    write_results(grade, assignment, out / grade.submission / "results.json")
    write_report(grade, assignment, out / grade.submission / "report.html")


def gradebook_csv(grades: list[Grade], assignment: Assignment) -> str:
    """One row per student, one column per exercise, then the total (LMS-importable)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["submission", *(e.name for e in assignment.exercises), "score", "max_score"])
    for g in grades:
        per = {e.name: sum(t.score for t in g.tests if t.exercise == e.name) for e in assignment.exercises}
        writer.writerow([g.submission, *(round(per[e.name], 4) for e in assignment.exercises), g.score, g.max_score])
    return buffer.getvalue()


def write_class_pages(grades: list[Grade], assignment: Assignment, out: Path) -> None:
    """DIR/index.html (class overview) and DIR/grades.csv."""
    grades = sorted(grades, key=lambda g: g.submission)
    links = {g.submission: f"{g.submission}/report.html" for g in grades}
    write_atomic(out / "index.html", render_index(grades, assignment, links))
    write_atomic(out / "grades.csv", gradebook_csv(grades, assignment))


_worker_assignment: Assignment | None = None


def _init_worker(assignment_path: str) -> None:
    global _worker_assignment
    _worker_assignment = load_assignment(assignment_path)


def _grade_in_worker(submission: Submission, device: str) -> Grade:
    return grade_one(submission, _worker_assignment, device)


def grade_many(submissions: list[Submission], assignment: Assignment, jobs: int = 1,
               device: str = "all") -> Iterator[Grade]:
    """Grade each submission, yielding grades as they complete; `jobs` worker processes import torch once."""
    if jobs <= 1 or len(submissions) <= 1:
        for s in submissions:
            yield grade_one(s, assignment, device)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker,
                             initargs=(str(assignment.path),)) as pool:
        futures = [pool.submit(_grade_in_worker, s, device) for s in submissions]
        for future in futures:
            yield future.result()
