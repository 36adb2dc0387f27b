"""One pytest session over the checks, collected once and run once per submission.

`torchgrade.engine.grading.grade_submission` runs a whole `pytest.main` per submission: parse the options,
import and collect every check module, run, unconfigure (pytest's unconfigure alone spends a
fifth of a second in `gc.collect`). Across a class that work is the same every time, so a batch
worker keeps one configured session and only swaps the submission between rounds. A check that
needs nothing but the plugin's own `check` and `device` is run directly (`plugin.run_direct`:
the check function called with them, its outcome recorded as the protocol's hooks would record
it), because pytest's per-item setup, fixture resolution and reports cost more than most checks.
Every other check runs through pytest's own `pytest_runtest_protocol` (as pytest-xdist's workers
and pytest-rerunfailures do), so its fixtures are set up and torn down exactly as in a fresh
session; the grade is built by the same plugin hooks (`torchgrade.plugin`) that `pytest.main`
would call.

This uses pytest's `_prepareconfig` and the configure/unconfigure steps of `wrap_session`, the
entry points pytest-xdist's workers use; tests/test_batch.py checks that a round grades exactly
as `grade_submission` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from _pytest.config import _prepareconfig

from torchgrade.engine import plugin
from torchgrade.engine.config import Assignment
from torchgrade.engine.grading import CHECKS_INI, GradingError, check_dirs, collection_mistake, own_plugins_only
from torchgrade.engine.scoring import Grade


class _CollectErrors:
    """Keeps collection failures (a check module that does not import) for the error message."""

    def __init__(self, checks_dir: Path) -> None:
        self.checks_dir = checks_dir
        self.errors: list[str] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # one line: the file and its error (grading.collection_mistake)
            self.errors.append(collection_mistake(self.checks_dir, report.nodeid, report.longreprtext))


class CheckSession:
    """The checks of an assignment, collected once, graded against one submission folder at a time."""

    def __init__(self, assignment: Assignment, *, device: str = "all", include_hidden: bool = True,
                 only: tuple[str, ...] = ()):
        self.assignment = assignment
        self.device = device
        self.include_hidden = include_hidden
        self.only = tuple(only)
        self._config: pytest.Config | None = None
        self._session: pytest.Session | None = None
        self._directs: dict[pytest.Item, bool] = {}

    def _args(self) -> list[str]:
        a = self.assignment
        args = [str(d) for d in check_dirs(a, self.include_hidden)]
        args += ["-c", str(CHECKS_INI), "--rootdir", str(a.checks_dir),
                 "--submission", str(a.stubs_dir), "--assignment", str(a.path), "--device", self.device,
                 # no terminal: nothing to print, and its per-test statistics would grow with the class
                 "-p", "no:terminal", "-p", "no:cacheprovider", "-p", "no:randomly",
                 # pytest 9 attaches its log handler to every non-propagating logger (torch has
                 # dozens) around each phase of each check; no grade reads captured logs
                 "-p", "no:logging",
                 # no capture: a session kept open would otherwise keep swapping this process's
                 # sys.stdout for the one it found when it opened (and checks print nothing)
                 "--capture=no",
                 # nothing is reported before the grade: verdicts may wait for their module's end
                 "--late-verdicts"]
        for name in self.only:
            args += ["--target", name]
        return args

    def open(self) -> None:
        """Configure pytest and collect the checks; GradingError if they cannot be collected."""
        if self._session is not None:
            return
        errors = _CollectErrors(self.assignment.checks_dir)
        try:
            with own_plugins_only():
                config = _prepareconfig(self._args(), [errors])
        except (pytest.UsageError, SystemExit) as e:
            raise GradingError(f"the checks could not be configured: {e}") from None
        # Failure text comes from the plugin; "no" keeps pytest from parsing the source of every
        # failing check for a traceback nobody reads (half the time of a round of stubs).
        config.option.tbstyle = "no"
        session = pytest.Session.from_config(config)
        config._do_configure()
        self._config, self._session = config, session
        try:
            config.hook.pytest_sessionstart(session=session)
            config.hook.pytest_collection(session=session)
        except BaseException as e:
            self.close()
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise GradingError(f"the checks could not be collected: {type(e).__name__}: {e}") from None
        if errors.errors or session.testsfailed:
            self.close()
            raise GradingError(errors.errors[0] if errors.errors else "the checks could not be collected")
        if not session.items:
            self.close()
            raise GradingError(f"no checks matched {', '.join(self.only) or 'the assignment'}")

    def grade(self, submission: Path, exercises: set[str] | None = None,
              select: Callable[[pytest.Item], bool] | None = None) -> Grade:
        """Run every collected check (or those of `exercises`, or those `select` keeps) against one
        submission folder; its scored grade."""
        self.open()
        config, session = self._config, self._session
        config.option.submission = str(Path(submission).resolve())
        plugin.pytest_configure(config)  # a fresh GradingState: this submission, a new sandbox, a new clock
        session.testsfailed = 0
        session.shouldfail = session.shouldstop = False
        items = [item for item in session.items if (exercises is None or plugin.exercise_of(item) in exercises)
                 and (select is None or select(item))]
        reasons = [plugin.set_aside_reason(item) for item in items]
        modules = {plugin.exercise_of(item) for item, reason in zip(items, reasons) if reason is None}
        config.stash[plugin._state_key].warm = len(modules) > 1
        config.stash[plugin._state_key].modules = modules
        # Most checks run directly (plugin.run_direct); pytest's protocol sees only the others, so
        # its setup and teardown of scopes follow them alone.
        protocol = [item for item, reason in zip(items, reasons) if reason is None and not self._direct(item)]
        following = dict(zip(protocol, protocol[1:] + [None]))
        try:
            for item, reason in zip(items, reasons):
                if reason is not None:  # a device not graded: its row, in its place, without a run
                    plugin.record_skipped(item, reason)
                    continue
                if self._direct(item):
                    plugin.run_direct(item)
                    continue
                if hasattr(item, "_report_sections"):
                    item._report_sections = []  # captured check output of earlier rounds
                item.ihook.pytest_runtest_protocol(item=item, nextitem=following[item])
        except BaseException:
            # Fixtures may be half set up: this session can't be trusted for another round.
            self.close()
            raise
        plugin.pytest_sessionfinish(session)
        grade = config.stash[plugin.grade_key]
        del config.stash[plugin.grade_key]
        return grade

    def _direct(self, item: pytest.Item) -> bool:
        if item not in self._directs:
            self._directs[item] = plugin.direct(item)
        return self._directs[item]

    def close(self) -> None:
        """Tear the session down (the sandbox of the last round is already closed)."""
        config, session = self._config, self._session
        self._config = self._session = None
        if config is None:
            return
        try:
            config.hook.pytest_sessionfinish(session=session, exitstatus=pytest.ExitCode.OK)
        except Exception:
            pass
        finally:
            config._ensure_unconfigure()

    def __enter__(self) -> "CheckSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: One session per (assignment, device, only) in this process: checks are collected once, however many
#: submissions it grades (a batch's worker, the autograder, the reference's cache).
_sessions: dict[tuple, CheckSession] = {}


def _key(assignment: Assignment, device: str, only: tuple[str, ...]) -> tuple:
    return str(assignment.path), device, only


def shared(assignment: Assignment, device: str, only: tuple[str, ...]) -> CheckSession:
    """This process's session for these checks, made on first use."""
    key = _key(assignment, device, only)
    session = _sessions.get(key)
    if session is None:
        session = _sessions[key] = CheckSession(assignment, device=device, only=only)
    return session


def open_session(assignment: Assignment, device: str, only: tuple[str, ...]) -> None:
    """Configure and collect the checks now (a pool's fork server does, once for all its workers)."""
    shared(assignment, device, only).open()


def forget(assignment: Assignment, device: str, only: tuple[str, ...]) -> None:
    """Drop this process's session for these checks (after the grader failed: the next one starts afresh)."""
    _sessions.pop(_key(assignment, device, only), None)
