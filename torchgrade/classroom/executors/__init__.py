"""Executors: where the submissions of a batch are graded (this process, a local pool, a Dask cluster).

An executor takes a job (a picklable callable: one submission in, its Grade out) and the
submissions, and yields `(submission, Grade or Crashed)` as each completes, in any order. It never
stops for one submission: a grading process that dies is a `Crashed` for the submission it held.
It does stop, by raising, when the job raises `GradingError` (the grader itself cannot run).
"""

from __future__ import annotations

from torchgrade.classroom.executors.dask import DaskExecutor
from torchgrade.classroom.executors.local import InProcess, Pool
from torchgrade.classroom.executors.outcomes import Crashed, Executor, Job, Outcome

__all__ = ["Crashed", "Executor", "Job", "Outcome", "make_executor"]


def make_executor(name: str, jobs: int, address: str | None = None) -> Executor:
    """The executor called `name` (local or dask) with `jobs` worker processes."""
    if name == "dask":
        return DaskExecutor(jobs, address)
    return InProcess() if jobs <= 1 else Pool(jobs)
