"""`torchgrade check --watch`: grade again, on every save, only the modules whose files changed.

What makes a check slow to start (Python, torch, pytest collecting the checks, the sandbox's zygote
importing torch, the reference's outcomes) is paid once. The checks stay collected in one pytest
session (``torchgrade.engine.session.CheckSession``), the zygote stays up, and the reference's outcomes
stay cached in this process; a re-check forks a fresh worker for the changed module only (its new
code is imported there) and runs that module's checks. The other modules keep their last results.

Files are polled (their size and modification time, then their bytes) rather than watched through
an OS notification API: a course has a few files, polling them costs microseconds, and it works the
same on every system and every editor (those that save by renaming a new file over the old one too).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from torchgrade.engine.config import Assignment, exercise_named
from torchgrade.sandbox import host
from torchgrade.engine.scoring import CheckResult, Grade
from torchgrade.engine.session import CheckSession

#: Seconds between two looks at the files.
POLL_S = 0.1


@dataclass
class Recheck:
    """One re-check: which modules changed, their new results, the whole grade, and how long it took."""

    exercises: tuple[str, ...]
    changed: Grade
    whole: Grade
    seconds: float


@dataclass
class Watcher:
    """A student's exercise folder, graded once, then again module by module as its files change."""

    assignment: Assignment
    folder: Path
    device: str = "all"
    only: tuple[str, ...] = ()
    _session: CheckSession | None = None
    _results: dict[str, list[CheckResult]] = field(default_factory=dict)
    _seen: dict[str, tuple] = field(default_factory=dict)  # exercise -> (stat, digest) when last graded
    _whole: Grade | None = None

    def exercises(self) -> list[str]:
        """The modules this watch grades (all visible ones, or those `only` names)."""
        wanted = {exercise_named(o) for o in self.only}
        return [e.name for e in self.assignment.exercises
                if e.visibility == "visible" and (not wanted or e.name in wanted)]

    def _stat(self, exercise: str) -> tuple[int, int] | None:
        try:
            stat = (self.folder / f"{exercise}.py").stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def changed(self) -> list[str]:
        """The modules whose files differ from what was last graded (a touch without a change is not one)."""
        found = []
        for exercise in self.exercises():
            stat = self._stat(exercise)
            seen = self._seen.get(exercise)
            if seen is not None and seen[0] == stat:
                continue
            digest = self._digest(exercise)
            if seen is not None and seen[1] == digest:
                self._seen[exercise] = (stat, digest)  # same bytes: remember the new stat only
                continue
            found.append(exercise)
        return found

    def _digest(self, exercise: str) -> str | None:
        try:
            return hashlib.sha256((self.folder / f"{exercise}.py").read_bytes()).hexdigest()
        except OSError:
            return None

    def grade(self, exercises: list[str] | None = None) -> Recheck:
        """Grade these modules (None: every one) and merge their results into the whole grade."""
        started = time.perf_counter()
        if self._session is None:
            self._session = CheckSession(self.assignment, device=self.device, include_hidden=False,
                                         only=self.only or tuple(self.exercises()))
        names = exercises if exercises is not None else self.exercises()
        for exercise in names:  # recorded before grading: a save during the run is seen next time
            self._seen[exercise] = (self._stat(exercise), self._digest(exercise))
        graded = self._session.grade(self.folder, set(names) if exercises is not None else None)
        host.warm_zygotes()  # every re-check from now on starts workers from a fully warmed zygote
        for exercise in names:
            self._results[exercise] = [t for t in graded.tests if t.exercise == exercise]
        order = {name: i for i, name in enumerate(self.exercises())}
        tests = [t for name in sorted(self._results, key=lambda n: order.get(n, len(order)))
                 for t in self._results[name]]
        self._whole = Grade(submission=graded.submission, tests=tests, execution_time=graded.execution_time,
                            output=graded.output, devices=graded.devices, isolation=graded.isolation,
                            watch=graded.watch, standin=graded.standin, notebooks=graded.notebooks)
        return Recheck(tuple(names), graded, self._whole, time.perf_counter() - started)

    def run(self, on_grade: Callable[[Recheck], None], stop: threading.Event, poll: float = POLL_S) -> None:
        """Grade everything, then each change, calling `on_grade` after each, until `stop` is set."""
        on_grade(self.grade())
        while not stop.wait(poll):
            changed = self.changed()
            if changed:
                on_grade(self.grade(changed))

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
