"""The `torchgrade` command: check (students), grade (instructors), stubs (course authors)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from .config import ConfigError, load_assignment
from .grading import GradingError, grade_submission
from .scoring import Grade

ASSIGNMENT_HELP = "The assignment file (default: assignment.yaml of this course)."
DEVICE_HELP = "Devices to grade on (default: all that are available)."


def _fail(message: str) -> None:
    click.echo(f"torchgrade: error: {message}", err=True)
    sys.exit(2)


def _assignment(path: str | None):
    try:
        return load_assignment(path)
    except ConfigError as e:
        _fail(str(e))


@click.group()
@click.version_option(__version__, prog_name="torchgrade")
def main() -> None:
    """Grade PyTorch exercises against reference solutions, with student code in a sandbox."""


def _print_summary(grade: Grade, assignment, verbose_lines: int = 12) -> None:
    from .report import exercise_rows

    for ex in exercise_rows(grade, assignment):
        done = ex["score"] >= ex["max_score"] - 1e-9
        mark = click.style("✓", fg="green") if done else click.style("✗", fg="red")
        click.echo(f"{mark} {ex['name']:<10} {ex['score']:6.2f} / {ex['max_score']:<6.2f} {ex['title']}")
        for t in ex["failed"]:
            colour = "red" if t.status == "failed" else "yellow"
            click.echo("    " + click.style(t.status.upper(), fg=colour) + f" {t.name}")
            lines = t.output.splitlines() or [""]
            for line in lines[:verbose_lines]:
                click.echo(f"        {line}")
            if len(lines) > verbose_lines:
                click.echo(f"        ... ({len(lines) - verbose_lines} more lines in the report)")
    skipped = sum(1 for t in grade.tests if t.status == "skipped")
    click.echo(f"\nscore: {grade.score:g} / {grade.max_score:g}   graded on: {', '.join(grade.devices)}"
               + (f"   ({skipped} checks skipped)" if skipped else ""))


@main.command()
@click.argument("targets", nargs=-1)
@click.option("--path", "path", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The folder with your exercise files (default: exercises/).")
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all", help=DEVICE_HELP)
@click.option("-x", "--exitfirst", is_flag=True, help="Stop at the first failing check.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("reports/check"), show_default=True, help="Where to write report.html and results.json.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def check(targets: tuple[str, ...], path: Path | None, device: str, exitfirst: bool, report_dir: Path,
          assignment_path: str | None) -> None:
    """Grade your own exercises with the visible checks: TARGETS are exercises (tensors) or names (tensors.view)."""
    from .report import write_report
    from .results import write_results

    assignment = _assignment(assignment_path)
    folder = path or assignment.stubs_dir
    if not folder.is_dir():
        _fail(f"{folder}: no such folder (use --path to point at your exercise files)")
    known = {e.name for e in assignment.exercises} | {t.qualname for t in assignment.targets}
    for t in targets:
        if t not in known:
            _fail(f"unknown exercise or target '{t}' (try one of: {', '.join(e.name for e in assignment.exercises)})")
    visible = tuple(t for t in targets) or tuple(e.name for e in assignment.exercises if e.visibility == "visible")
    try:
        grade = grade_submission(folder, assignment, device=device, include_hidden=False, only=visible,
                                 stop_first=exitfirst)
    except GradingError as e:
        _fail(str(e))
    _print_summary(grade, assignment)
    write_results(grade, assignment, report_dir / "results.json")
    write_report(grade, assignment, report_dir / "report.html")
    click.echo(f"report: {report_dir / 'report.html'}")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder: <submission>/results.json and report.html, index.html, grades.csv.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes (each imports torch once and grades many submissions).")
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all", help=DEVICE_HELP)
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def grade(paths: tuple[Path, ...], out: Path, jobs: int, device: str, assignment_path: str | None) -> None:
    """Grade submissions: each PATH is a submission folder, a .zip, or a folder of those."""
    from .batch import grade_many, write_class_pages, write_outputs
    from .submissions import InputError, discover

    assignment = _assignment(assignment_path)
    try:
        submissions = discover(list(paths), tuple(e.name for e in assignment.exercises))
    except InputError as e:
        _fail(str(e))
    if out.exists() and not out.is_dir():
        _fail(f"{out}: exists and is not a folder")
    grades = []
    try:
        for g in grade_many(submissions, assignment, jobs=jobs, device=device):
            write_outputs(g, assignment, out)
            grades.append(g)
            click.echo(f"{g.submission}: {g.score:g} / {g.max_score:g}")
    except GradingError as e:
        _fail(str(e))
    if len(grades) > 1:
        write_class_pages(grades, assignment, out)
    click.echo(f"graded {len(grades)} submission(s) into {out}")


@main.command()
@click.option("--check", "check_only", is_flag=True, help="Only report stubs that are out of date; exit 1 if any.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def stubs(check_only: bool, assignment_path: str | None) -> None:
    """Generate the student stubs (exercises/) from the reference solutions' solution markers."""
    from .authoring import MarkerError, generate_stubs

    assignment = _assignment(assignment_path)
    try:
        changed = generate_stubs(assignment.reference_dir, assignment.stubs_dir, write=not check_only)
    except MarkerError as e:
        _fail(str(e))
    for path in changed:
        click.echo(f"{'out of date' if check_only else 'wrote'}: {path}")
    if check_only and changed:
        click.echo("run `torchgrade stubs` to regenerate them", err=True)
        sys.exit(1)
