"""The `torchgrade` command group and what its commands share: the course they run on, how they fail."""

from __future__ import annotations

import sys

import click

from torchgrade.base.version import __version__
from torchgrade.engine.config import ConfigError, load_assignment

ASSIGNMENT_HELP = "The assignment file (default: assignment.yaml of this course)."
DEVICE_HELP = "Devices to grade on (default: all that are available)."
PRIVATE_HELP = "Write output files readable by their owner only (0600; default 0644, so a web server can serve them)."


def _fail(message: str) -> None:
    click.echo(f"torchgrade: error: {message}", err=True)
    sys.exit(2)


def _assignment(path: str | None, *, checks: str | None = None):
    """The course's assignment; with `checks` ("collect": its check files imported too, or "read"), the
    course is validated first (torchgrade.engine.course.validate_course): one line and exit 2 for a mistake."""
    try:
        assignment = load_assignment(path)
    except ConfigError as e:
        _fail(str(e))
    if checks is not None:
        _check_course(assignment, checks)
    return assignment


def _check_course(assignment, checks: str = "collect") -> None:
    """Refuse, in one line, a course with an authoring mistake; print its notes ("collect" or "read")."""
    from torchgrade.sandbox.warmup import importing

    with importing():  # it imports torch and the checks, for this process to grade with next
        mistake = course_mistake(assignment, collect=checks == "collect")
    if mistake:
        _fail(mistake)
    _course_notes(assignment)


def _course_notes(assignment) -> None:
    from torchgrade.engine.course import course_notes

    for note in course_notes(assignment):
        click.echo(f"torchgrade: note: {note}", err=True)


def course_mistake(assignment, collect: bool = True) -> str | None:
    """The first authoring mistake of a course (torchgrade.engine.course.validate_course), in one line, or None."""
    from torchgrade.engine.course import CourseError, validate_course

    try:
        validate_course(assignment, collect=collect)
    except CourseError as e:
        return str(e)
    return None


@click.group()
@click.version_option(__version__, prog_name="torchgrade")
def main() -> None:
    """Grade PyTorch exercises against reference solutions, with student code in a sandbox."""


def _check_targets(assignment, targets: tuple[str, ...]) -> None:
    """Refuse a TARGET that names no exercise, target or check (exercise.target::test_name) of the assignment."""
    from torchgrade.engine.course import target_mistake

    mistake = target_mistake(assignment, targets)
    if mistake:
        _fail(mistake)
