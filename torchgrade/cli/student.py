"""`torchgrade check`: a student's (or an author's) checks on one folder, once or on every save."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from torchgrade.engine.config import exercise_named
from torchgrade.engine.i18n import LANG_HELP, LANGUAGES
from torchgrade.sandbox.host import start_early
from torchgrade.cli.common import (ASSIGNMENT_HELP, DEVICE_HELP, _assignment, _check_course,
                                   _check_targets, _fail, main)


@main.command()
@click.argument("targets", nargs=-1)
@click.option("--path", "path", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The folder with your exercise files (default: exercises/).")
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all", help=DEVICE_HELP)
@click.option("-x", "--exitfirst", is_flag=True, help="Stop at the first failing check.")
@click.option("-v", "--verbose", is_flag=True, help="Show every failing check in full (default: the first per target).")
@click.option("--lang", type=click.Choice(LANGUAGES), default=None, help=LANG_HELP)
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Where to write report.html and results.json (default: reports/check in the course folder).")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
@click.option("-w", "--watch", is_flag=True,
              help="Keep going: grade again each module whose file you save, with one summary line each.")
def check(targets: tuple[str, ...], path: Path | None, device: str, exitfirst: bool, verbose: bool, lang: str | None,
          report_dir: Path | None, assignment_path: str | None, watch: bool) -> None:
    """Grade your own exercises with the visible checks.

    TARGETS are exercises (tensors), names in them (tensors.view), or one check as a failure's
    "rerun:" line prints it (tensors.view::test_infers_the_dimension_given_as_minus_one); none: all.

    Exit status: 0 when every graded check passed (checks set aside, such as CUDA ones on a machine
    without CUDA, do not count), 1 when any graded check failed, 2 when the checks could not run (torchgrade's
    own installation failed without your code: one line says what).
    """
    from torchgrade.engine.i18n import set_language, t
    from torchgrade.sandbox import host, isolation, portable

    set_language(lang)
    missing = portable.unavailable()
    if missing:  # not even the portable sandbox can run on this Python: say what is missing, nothing else
        _fail(t("sandbox_unavailable", why=missing))
    assignment = _assignment(assignment_path)
    # The sandbox imports torch (its start is the longest wait of a first check) while this process
    # imports the rest, checks the course (importing torch too) and collects the checks: started first.
    start_early(assignment.probes_dir, one_module=len({exercise_named(t) for t in targets}) == 1)
    from torchgrade.outputs import feedback, terminal
    from torchgrade.engine import grader_errors, refcache
    from torchgrade.engine.grading import GradingError, grade_submission
    from torchgrade.outputs.report import write_report
    from torchgrade.engine.results import write_results
    from torchgrade.engine.session import CheckSession

    _check_course(assignment, "read")  # a visible check file that does not import: grading says so, same line
    folder = path or assignment.stubs_dir
    if not folder.is_dir():
        _fail(f"{folder}: no such folder (use --path to point at your exercise files)")
    _check_targets(assignment, targets)
    report_dir = report_dir or assignment.root / "reports" / "check"
    from torchgrade.engine.notebooks import graded_folder, has_notebooks

    if watch:
        if has_notebooks(folder, assignment):
            _fail(f"{folder}: --watch follows .py files; in a notebook, check from a cell (docs/notebooks.md)")
        _watch(assignment, folder, targets, device, verbose, report_dir, path, assignment_path)
        return
    visible = tuple(targets) or tuple(e.name for e in assignment.exercises if e.visibility == "visible")
    try:
        import torch  # noqa: F401  (meanwhile the sandbox imports it too)

        level = host.isolation_level(isolation.requested_level())
        # the reference's side of each check, from the last run; notebooks graded as the modules they stand for
        with refcache.kept(assignment, device, level), graded_folder(folder, assignment) as (graded, notes):
            for note in notes:
                click.echo(f"torchgrade: note: {note}", err=True)
            if exitfirst:  # pytest's own -x
                host.started()  # one line and exit 2 if no sandbox can start here, not a grader error per check
                grade = grade_submission(graded, assignment, device=device, include_hidden=False, only=visible,
                                         stop_first=True)
            else:  # as `check --watch` and a batch grade: collected while the sandbox starts, then run
                session = CheckSession(assignment, device=device, include_hidden=False, only=visible)
                session.open()
                host.started()
                grade = session.grade(graded)
            grade.output = "\n".join([*notes, grade.output]).strip()
    except host.IsolationError as e:
        _fail(t("sandbox_unavailable", why=" ".join(str(e).split())))
    except GradingError as e:
        _fail(str(e))
    if grader_errors.FAULTS:  # the installation's fault, met without the student's code: no score to show
        _fail(grader_errors.FAULTS[0])
    view = feedback.build(grade, assignment, path=str(path) if path else "", assignment_arg=assignment_path)
    terminal.echo(view, verbose=verbose)
    write_results(grade, assignment, report_dir / "results.json")
    write_report(grade, assignment, report_dir / "report.html", lang=lang)
    click.echo(t("report_at", path=report_dir / "report.html"))
    failed = sum(1 for c in grade.tests if c.status in ("failed", "error"))
    if failed:  # a CI-friendly status: a job that runs `torchgrade check` fails until every check passes
        click.echo(t("checks_did_not_pass", count=failed))
        sys.exit(1)


def _watch(assignment, folder: Path, targets: tuple[str, ...], device: str, verbose: bool, report_dir: Path,
           path: Path | None, assignment_path: str | None) -> None:
    """`check --watch`: the first grade in full, then a summary line (and the failures) per re-check."""
    import threading
    import time

    from torchgrade.outputs import feedback, terminal
    from torchgrade.engine.grading import GradingError
    from torchgrade.engine.i18n import t
    from torchgrade.outputs.report import write_report
    from torchgrade.engine.results import write_results
    from torchgrade.engine.watch import Watcher

    watcher = Watcher(assignment, folder, device=device, only=targets)
    args = dict(path=str(path) if path else "", assignment_arg=assignment_path)
    pending = {"first grade"}  # the first grade is shown in full, as `check` shows it

    def show(recheck) -> None:
        whole = feedback.build(recheck.whole, assignment, **args)
        if "first grade" in pending:
            pending.clear()
            terminal.echo(whole, verbose=verbose)
            click.echo(t("watching", folder=folder))
        else:
            for line in terminal.render(feedback.build(recheck.changed, assignment, **args), verbose=verbose,
                                        totals=False):
                click.echo(line.rstrip())
            changed = recheck.changed
            click.echo(t("rechecked", clock=time.strftime("%H:%M:%S"),
                         modules=", ".join(f"{e}.py" for e in recheck.exercises),
                         score=f"{terminal.points(changed.score)} / {terminal.points(changed.max_score)}",
                         seconds=recheck.seconds, total=f"{terminal.points(recheck.whole.score)} / "
                         f"{terminal.points(recheck.whole.max_score)}", percent=f"{whole.percent:.0f}"))
        write_results(recheck.whole, assignment, report_dir / "results.json")
        write_report(recheck.whole, assignment, report_dir / "report.html")

    stop = threading.Event()
    try:
        watcher.run(show, stop)
    except KeyboardInterrupt:
        stop.set()
    except GradingError as e:
        _fail(str(e))
    finally:
        watcher.close()
