"""The `torchgrade` command: check (students), grade (instructors), stubs (course authors)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from .config import ConfigError, load_assignment
from .grading import GradingError, grade_submission
from .i18n import LANG_HELP, LANGUAGES
from .sandbox.host import start_early

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


def _check_targets(assignment, targets: tuple[str, ...]) -> None:
    """Refuse a TARGET that names no exercise, target or check (exercise.target::test_name) of the assignment."""
    known = {e.name for e in assignment.exercises} | {t.qualname for t in assignment.targets}
    for target in targets:
        name, sep, check_name = target.partition("::")
        if name not in known or (sep and not check_name):
            _fail(f"unknown exercise or target '{target}' (try one of: "
                  f"{', '.join(e.name for e in assignment.exercises)}, an exercise.target such as "
                  f"{assignment.targets[0].qualname}, or the exercise.target::test_name a failure prints)")


@main.command()
@click.argument("targets", nargs=-1)
@click.option("--path", "path", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The folder with your exercise files (default: exercises/).")
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all", help=DEVICE_HELP)
@click.option("-x", "--exitfirst", is_flag=True, help="Stop at the first failing check.")
@click.option("-v", "--verbose", is_flag=True, help="Show every failing check in full (default: the first per target).")
@click.option("--lang", type=click.Choice(LANGUAGES), default=None, help=LANG_HELP)
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("reports/check"), show_default=True, help="Where to write report.html and results.json.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def check(targets: tuple[str, ...], path: Path | None, device: str, exitfirst: bool, verbose: bool, lang: str | None,
          report_dir: Path, assignment_path: str | None) -> None:
    """Grade your own exercises with the visible checks.

    TARGETS are exercises (tensors), names in them (tensors.view), or one check as a failure's
    "rerun:" line prints it (tensors.view::test_infers_the_dimension_given_as_minus_one); none: all.

    Exit status: 0 when every graded check passed (checks set aside, such as CUDA ones on a machine
    without CUDA, do not count), 1 when any graded check failed, 2 when the checks could not run.
    """
    from . import feedback, terminal
    from .i18n import set_language, t
    from .report import write_report
    from .results import write_results
    from .sandbox import host, portable

    set_language(lang)
    missing = portable.unavailable()
    if missing:  # not even the portable sandbox can run on this Python: say what is missing, nothing else
        _fail(t("sandbox_unavailable", why=missing))
    assignment = _assignment(assignment_path)
    folder = path or assignment.stubs_dir
    if not folder.is_dir():
        _fail(f"{folder}: no such folder (use --path to point at your exercise files)")
    _check_targets(assignment, targets)
    start_early()  # the sandbox imports torch while this process does the same and collects the checks
    visible = tuple(targets) or tuple(e.name for e in assignment.exercises if e.visibility == "visible")
    try:
        import torch  # noqa: F401  (meanwhile the sandbox imports it too)

        host.started()  # one line and exit 2 if no sandbox can start here, not a grader error per check
        grade = grade_submission(folder, assignment, device=device, include_hidden=False, only=visible,
                                 stop_first=exitfirst)
    except host.IsolationError as e:
        _fail(t("sandbox_unavailable", why=" ".join(str(e).split())))
    except GradingError as e:
        _fail(str(e))
    view = feedback.build(grade, assignment, path=str(path) if path else None)
    terminal.echo(view, verbose=verbose)
    write_results(grade, assignment, report_dir / "results.json")
    write_report(grade, assignment, report_dir / "report.html", lang=lang)
    click.echo(t("report_at", path=report_dir / "report.html"))
    failed = sum(1 for c in grade.tests if c.status in ("failed", "error"))
    if failed:  # a CI-friendly status: a job that runs `torchgrade check` fails until every check passes
        click.echo(t("checks_did_not_pass", count=failed))
        sys.exit(1)


class ShardType(click.ParamType):
    """`--shard i/n`: shard i (1-based) of n."""

    name = "i/n"

    def convert(self, value, param, ctx):
        from .shards import Shard

        if not isinstance(value, str):
            return value
        try:
            return Shard.parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder: <submission>/results.json and report.html, index.html, grades.csv, junit.xml.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes (each imports torch once and grades many submissions).")
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all", help=DEVICE_HELP)
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
@click.option("--shard", type=ShardType(), default=None,
              help="Grade only shard i of n (1/4 ... 4/4), chosen by a stable hash of each submission's name; "
                   "combine the shards with `torchgrade merge`.")
@click.option("--force", is_flag=True,
              help="Grade again submissions already graded in --out (a re-run skips those graded from the same "
                   "files by the same grader).")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="Where to grade: local processes, or a Dask cluster (needs the `cluster` extra).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="With --executor dask: a running Dask scheduler (default: a local cluster of -j workers).")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar (default: when on a terminal).")
def grade(paths: tuple[Path, ...], out: Path, jobs: int, device: str, assignment_path: str | None, shard,
          force: bool, executor: str, scheduler: str | None, progress: bool | None) -> None:
    """Grade submissions: each PATH is a submission folder, a .zip, or a folder of those.

    Resumable: each graded submission is recorded in DIR/ledger.jsonl as it completes, and a re-run
    skips what this grader already graded from the same files.
    """
    from .batch import OutputBusy, grade_class, locked
    from .executors import make_executor
    from .progress import Progress, summary_lines
    from .submissions import InputError, discover

    assignment = _assignment(assignment_path)
    try:
        submissions = discover(list(paths), tuple(e.name for e in assignment.exercises))
    except InputError as e:
        _fail(str(e))
    if out.exists() and not out.is_dir():
        _fail(f"{out}: exists and is not a folder")
    if executor == "dask":
        from .executors.dask import available

        if not available():
            _fail("--executor dask needs Dask distributed: pip install 'torchgrade[cluster]'")
    elif scheduler:
        _fail("--scheduler is for --executor dask")
    if shard is not None:
        total = len(submissions)
        submissions = shard.select(submissions)
        click.echo(f"shard {shard}: {len(submissions)} of {total} submission(s)")
    if executor == "local" and jobs == 1:
        start_early()  # graded in this process
    bar = Progress(enabled=progress)
    try:
        with locked(out):
            result = grade_class(submissions, assignment, out, executor=make_executor(executor, jobs, scheduler),
                                 device=device, force=force, on_start=bar.start, on_grade=bar.graded)
    except (GradingError, OutputBusy) as e:
        _fail(str(e))
    except KeyboardInterrupt:
        bar.close()
        click.echo("torchgrade: interrupted; every submission graded so far is recorded: run the same command "
                   "to grade the rest", err=True)
        sys.exit(130)
    finally:
        bar.close()
    for line in summary_lines(result.records, result.graded, result.skipped, result.crashed, result.seconds):
        click.echo(line)
    click.echo(f"graded {len(result.grades)} submission(s) into {out}")


@main.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder for the whole class: every submission's folder, index.html, grades.csv, junit.xml.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def merge(shards: tuple[Path, ...], out: Path, assignment_path: str | None) -> None:
    """Combine the output folders of `torchgrade grade --shard i/n` runs into one class report."""
    from .batch import OutputBusy, locked, write_class_pages
    from .ledger import Ledger
    from .shards import MergeError, merge as merge_shards

    assignment = _assignment(assignment_path)
    if out.exists() and not out.is_dir():
        _fail(f"{out}: exists and is not a folder")
    for folder in shards:  # before anything is written
        if not Ledger(folder).path.is_file():
            _fail(f"{folder}: no {Ledger(folder).path.name} (not a folder written by `torchgrade grade`)")
    try:
        with locked(out):
            grades, records = merge_shards(list(shards), out)
            write_class_pages(grades, assignment, out)
    except (MergeError, OutputBusy) as e:
        _fail(str(e))
    click.echo(f"merged {len(grades)} submission(s) from {len(shards)} shard(s) into {out}")


@main.command()
@click.option("--check", "check_only", is_flag=True,
              help="Change nothing: list stubs that are out of date and docstrings without a Chinese summary; "
                   "exit 1 if any.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def stubs(check_only: bool, assignment_path: str | None) -> None:
    """Generate the student stubs (exercises/) from the reference solutions' solution markers."""
    from .authoring import MarkerError, docstring_problems, generate_stubs, make_stub

    assignment = _assignment(assignment_path)
    try:
        changed = generate_stubs(assignment.reference_dir, assignment.stubs_dir, write=not check_only)
        problems = [p for ref in sorted(assignment.reference_dir.glob("*.py"))
                    if not ref.name.startswith("_") and assignment.chinese_summaries
                    for p in docstring_problems(make_stub(ref.read_text(encoding="utf-8"), str(ref)), ref.name)]
    except (MarkerError, SyntaxError) as e:
        _fail(str(e))
    for path in changed:
        click.echo(f"{'out of date' if check_only else 'wrote'}: {path}")
    for problem in problems:
        click.echo(f"docstring: {problem}", err=True)
    if check_only and changed:
        click.echo("run `torchgrade stubs` to regenerate them", err=True)
    if not changed:
        click.echo(f"stubs in {assignment.stubs_dir} are up to date")
    if check_only and (changed or problems):
        sys.exit(1)


@main.command()
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("dist"),
              show_default=True, help="Where to write the bundle folder and its .zip.")
@click.option("--name", default="student", show_default=True, help="The bundle's name: OUT/NAME/ and OUT/NAME.zip.")
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all",
              help="Devices to record expected outcomes on (default: all that are available; see torchgrade/bundle.py).")
@click.option("--verify", is_flag=True,
              help="Also grade the reference through the sandbox; refuse to build unless it scores full marks.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def bundle(out: Path, name: str, device: str, verify: bool, assignment_path: str | None) -> None:
    """Build the student bundle: stubs, visible checks, the engine and recorded expected outcomes.

    It holds no reference solutions and no hidden checks: the visible checks are run once on the
    reference here, and their expected outcomes are recorded into the bundle instead.
    """
    from .bundle import BundleError, build_bundle

    assignment = _assignment(assignment_path)
    try:
        built = build_bundle(assignment, out, name=name, device=device, verify=verify)
    except (BundleError, GradingError) as e:
        _fail(str(e))
    recorded = ", ".join(f"{e} {n}" for e, n in built.recorded.items())
    click.echo(f"recorded expected outcomes on {', '.join(built.devices)}: {recorded}")
    click.echo(f"wrote {built.folder}/ ({len(built.files)} files) and {built.zip}")


if __name__ == "__main__":  # `python -m torchgrade.cli check` works without installing the package
    main()
