"""Executors: where the submissions of a batch are graded (this process, a local pool, a Dask cluster).

An executor takes a job (a picklable callable: one submission in, its Grade out) and the
submissions, and yields `(submission, Grade or Crashed)` as each completes, in any order. It never
stops for one submission: a grading process that dies is a `Crashed` for the submission it held.
It does stop, by raising, when the job raises `GradingError` (the grader itself cannot run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from ..scoring import Grade
from ..submissions import Submission


@dataclass(frozen=True)
class Crashed:
    """The process grading a submission died; `why` says how, in words for the report."""

    why: str


Outcome = tuple[Submission, "Grade | Crashed"]
Job = Callable[[Submission], Grade]


class Executor(Protocol):
    """Grades submissions somewhere and yields each outcome as it completes."""

    def run(self, job: Job, submissions: list[Submission]) -> Iterator[Outcome]:
        ...


def make_executor(name: str, jobs: int, address: str | None = None) -> Executor:
    """The executor called `name` (local or dask) with `jobs` worker processes."""
    if name == "dask":
        from .dask import DaskExecutor

        return DaskExecutor(jobs, address)
    from .local import InProcess, Pool

    return InProcess() if jobs <= 1 else Pool(jobs)
