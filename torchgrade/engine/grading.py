"""Grading one submission: a pytest session over the checks, run in this process."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Iterator

import pytest

from torchgrade.base.paths import PACKAGE
from torchgrade.engine.config import Assignment
from torchgrade.engine.scoring import Grade


#: The pytest configuration every course's checks run under (a course needs none of its own).
CHECKS_INI = PACKAGE / "checks.ini"


class GradingError(Exception):
    """The grader itself could not run (not a problem with the submission)."""


class _Collector:
    """Receives the finished grade from the plugin before the session is torn down."""

    def __init__(self, checks_dir: Path) -> None:
        self.checks_dir = checks_dir
        self.grade: Grade | None = None
        self.collect_error: str | None = None

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        from torchgrade.engine.plugin import grade_key  # (imports torch: not for the parent of a pool, which only writes files)

        self.grade = config.stash.get(grade_key, None)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and self.collect_error is None:  # a check file that does not import: one line
            self.collect_error = collection_mistake(self.checks_dir, report.nodeid, report.longreprtext)


def collection_mistake(checks_dir: Path, nodeid: str, longrepr: str) -> str:
    """One line for a check file that does not import: the file and the error pytest ends its report with.

    What the failed import left in sys.modules is dropped: pytest would take it as imported next time."""
    import os
    import sys

    path = checks_dir / nodeid.split("::")[0]
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.abspath(file) == os.path.abspath(path):
            del sys.modules[name]
    lines = [line for line in longrepr.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    error = errors[-1] if errors else (lines[-1].strip() if lines else "unknown error")
    return f"{path}: this check file cannot be imported: {error}"  # (the absolute path, as the other lines)


def check_dirs(assignment: Assignment, include_hidden: bool) -> list[Path]:
    """The folders of checks to run: visible/, and hidden/ when grading for an instructor."""
    dirs = [assignment.checks_dir / "visible"]
    if include_hidden and (assignment.checks_dir / "hidden").is_dir():
        dirs.append(assignment.checks_dir / "hidden")
    return dirs


@contextlib.contextmanager
def own_plugins_only() -> Iterator[None]:
    """A course's checks need torchgrade's plugin alone (checks.ini loads it): the pytest plugins installed
    beside it (a student's pytest-asyncio, the one platformdirs registers) are not loaded, so one that is
    broken, or changes how tests run, cannot stop or change grading."""
    saved = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = saved


def grade_submission(submission: Path, assignment: Assignment, *, device: str = "all",
                     include_hidden: bool = True, only: tuple[str, ...] = (), stop_first: bool = False) -> Grade:
    """Run the checks against one submission folder and return its scored grade."""
    args = [str(d) for d in check_dirs(assignment, include_hidden)]
    args += ["-c", str(CHECKS_INI), "--rootdir", str(assignment.checks_dir),
             "--submission", str(submission), "--assignment", str(assignment.path), "--device", device,
             "-q", "--no-header", "-p", "no:cacheprovider", "-p", "no:randomly", "--tb=no", "-rN"]
    for name in only:
        args += ["--target", name]
    # pytest's own output is not shown, only the grade: verdicts may wait for their module's end, except
    # where the first failure must stop the run
    args.append("-x" if stop_first else "--late-verdicts")
    collector = _Collector(assignment.checks_dir)
    log = io.StringIO()
    with contextlib.redirect_stdout(log), own_plugins_only():
        code = pytest.main(args, plugins=[collector])
    if collector.collect_error is not None:
        raise GradingError(collector.collect_error)
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED) \
            or collector.grade is None:
        if code == pytest.ExitCode.NO_TESTS_COLLECTED:
            raise GradingError(f"no checks matched {', '.join(only) or 'the assignment'}")
        raise GradingError(f"the checks could not run (pytest exit {int(code)}):\n{log.getvalue()[-3000:]}")
    return collector.grade
