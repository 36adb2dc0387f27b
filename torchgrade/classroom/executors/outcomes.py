"""What an executor runs and what it yields: a job, and for each submission a Grade or how its process died."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from torchgrade.engine.scoring import Grade
from torchgrade.classroom.submissions import Submission


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
