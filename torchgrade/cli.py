"""The `torchgrade` command: check (students), grade (instructors), stubs (course authors)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click

from torchgrade.base.version import __version__
from torchgrade.engine.config import ConfigError, exercise_named, load_assignment
from torchgrade.engine.i18n import LANG_HELP, LANGUAGES
from torchgrade.sandbox.host import start_early
from torchgrade.sandbox.isolation import ENV_VAR as ISOLATION_ENV
from torchgrade.sandbox.isolation import LEVELS as ISOLATION_LEVELS

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
    known = {e.name for e in assignment.exercises} | {t.qualname for t in assignment.targets}
    for target in targets:
        name, sep, check_name = target.partition("::")
        if name not in known or (sep and not check_name):
            from torchgrade.engine.course import did_you_mean

            near = did_you_mean(name, known)
            if near:
                _fail(f"unknown exercise or target '{target}'{near}")
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
    view = feedback.build(grade, assignment, path=str(path) if path else None, assignment_arg=assignment_path)
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
    args = dict(path=str(path) if path else None, assignment_arg=assignment_path)
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


#: Why `grade` will not run at isolation `process` unless asked to, and the two ways out (one line).
PROCESS_REFUSED = (
    "refusing to grade: the only sandbox available here is isolation 'process' ({why}), where a submission "
    "runs as your own user: it could read the reference solutions, the hidden checks, other submissions and "
    "your environment, and rewrite the results of every submission graded after it. Install bubblewrap "
    "(Debian/Ubuntu: `sudo apt-get install bubblewrap`; GitHub Actions: a step `run: sudo apt-get install -y "
    f"bubblewrap`), or accept the risk with `--isolation process` (or {ISOLATION_ENV}=process); see SECURITY.md")
PROCESS_WARNING = ("torchgrade: warning: grading at isolation 'process', as asked: a submission can read the "
                   "reference, the hidden checks and other submissions, and forge other students' results; "
                   "every report and results.json says so")


def _demand_isolation(choice: str | None, assignment, keep: bool) -> str:
    """The isolation level `grade` runs at: the one asked for (--isolation, else TORCHGRADE_ISOLATION), else the
    best that starts here, which may not be `process` (fail closed: exit 2 before any student code runs).

    The sandbox is started here (it runs no student code) so that its level is known, not guessed; every
    process of the run then demands that level: none falls back to a weaker one. Unless this process
    grades (`keep`), the sandbox only proves the level and ends: the pool's workers start their own.
    """
    import shutil

    from torchgrade.sandbox import host, isolation

    previous = os.environ.get(ISOLATION_ENV)
    context = click.get_current_context(silent=True)
    if context is not None:  # this process's environment is as it was once the command is done
        context.call_on_close(lambda: os.environ.pop(ISOLATION_ENV, None) if previous is None
                              else os.environ.__setitem__(ISOLATION_ENV, previous))
    if choice is not None:
        if choice == "auto":
            os.environ.pop(ISOLATION_ENV, None)
        else:
            os.environ[ISOLATION_ENV] = choice
    try:
        requested = isolation.requested_level()
        host.use_course(assignment.probes_dir)  # the sandbox started here is the one this process grades with
        level = host.settle(requested) if keep else host.choose_level(requested)
    except isolation.IsolationError as e:
        _fail(str(e))
    if level == "process" and requested is None:
        why = ("bubblewrap does not work here" if shutil.which("bwrap") else "bubblewrap is not installed") + \
              (" and torchgrade does not run as root" if getattr(os, "geteuid", lambda: -1)() != 0 else
               " and the sandbox user cannot read this Python installation")
        _fail(PROCESS_REFUSED.format(why=why))
    os.environ[ISOLATION_ENV] = level
    return level


class ShardType(click.ParamType):
    """`--shard i/n`: shard i (1-based) of n."""

    name = "i/n"

    def convert(self, value, param, ctx):
        from torchgrade.classroom.shards import Shard

        if not isinstance(value, str):
            return value
        try:
            return Shard.parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


class _Terminated(KeyboardInterrupt):
    """The run was sent SIGTERM (a KeyboardInterrupt: what runs a check lets it through, as it does Ctrl-C;
    an Exception was taken for that check's failure, and the run graded on)."""


def _terminated(signum, frame) -> None:
    raise _Terminated()


def _check_out(out: Path) -> None:
    """Refuse an --out that cannot be a folder, before anything is graded."""
    for parent in [out, *out.parents]:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                _fail(f"{out}: {'exists and ' if parent == out else f'{parent} '}is not a folder"
                      + ("" if parent == out else " (--out must be a folder path)"))
            return


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),  # checked by _check_out: one line
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
@click.option("--private", is_flag=True, help=PRIVATE_HELP)
@click.option("--isolation", "isolation_choice", type=click.Choice(["auto", *ISOLATION_LEVELS]), default=None,
              help=f"The sandbox to demand (default: {ISOLATION_ENV}, else the best available). Grading refuses "
                   "to run at `process`, where a submission can forge other students' results, unless it is "
                   "asked for here or there. See SECURITY.md.")
def grade(paths: tuple[Path, ...], out: Path, jobs: int, device: str, assignment_path: str | None, shard,
          force: bool, executor: str, scheduler: str | None, progress: bool | None,
          isolation_choice: str | None, private: bool) -> None:
    """Grade submissions: each PATH is a submission folder, a .zip, or a folder of those.

    Resumable: each graded submission is recorded in DIR/ledger.jsonl as it completes, and a re-run
    skips what this grader already graded from the same files.
    """
    from torchgrade.classroom.batch import OutputBusy, OutputError, grade_class, locked
    from torchgrade.classroom.executors import make_executor
    from torchgrade.engine.grading import GradingError
    from torchgrade.classroom.progress import Progress, summary_lines
    from torchgrade.engine.results import set_private
    from torchgrade.engine.notebooks import module_names
    from torchgrade.classroom.submissions import InputError, survey

    set_private(private)
    assignment = _assignment(assignment_path)
    _check_out(out)
    try:
        found = survey(list(paths), module_names(assignment), out)
    except InputError as e:
        _fail(str(e))
    submissions = found.submissions
    for note in found.notes:
        click.echo(f"torchgrade: note: {note}", err=True)
    from torchgrade.classroom.overrides import Overrides, OverridesError

    try:  # the instructor's decisions, checked against the whole class (every shard) before anything runs
        decisions = Overrides.load(out, assignment, [s.name for s in submissions])
    except OverridesError as e:
        _fail(str(e))
    if executor == "dask":
        from torchgrade.classroom.executors.dask import available

        if not available():
            _fail("--executor dask needs Dask distributed: pip install 'torchgrade[cluster]'")
    elif scheduler:
        _fail("--scheduler is for --executor dask")
    if shard is not None:
        total = len(submissions)
        submissions = shard.select(submissions)
        click.echo(f"shard {shard}: {len(submissions)} of {total} submission(s)")
    bar = Progress(enabled=progress)
    previous = signal.signal(signal.SIGTERM, _terminated)  # a SIGTERM ends the run as Ctrl-C does
    try:
        # Before anything is written or any student code runs: the course's check, and the sandbox's level
        # (this process keeps its sandbox if it grades, -j 1); a pool's fork server imports meanwhile.
        pool = executor == "local" and jobs > 1
        if not pool:
            _check_course(assignment)
        level = _demand_isolation(isolation_choice, assignment, keep=executor == "local" and jobs == 1)
        if pool:  # the course is checked in a fork of the fork server: this process never imports torch
            from torchgrade.classroom.executors.local import call_in_fork_server, start_fork_server

            start_fork_server(assignment.path, device)
            mistake = call_in_fork_server(course_mistake, assignment)
            if mistake:
                _fail(mistake)
            _course_notes(assignment)
        if level == "process":  # said once the run will go ahead: an authoring mistake is the one line then
            click.echo(PROCESS_WARNING, err=True)
        with locked(out):
            result = grade_class(submissions, assignment, out, executor=make_executor(executor, jobs, scheduler),
                                 device=device, force=force, on_start=bar.start, on_grade=bar.graded,
                                 overrides=decisions)
    except (GradingError, OutputBusy, OutputError) as e:
        bar.close()
        _fail(str(e))
    except (KeyboardInterrupt, _Terminated) as e:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: no traceback of the way out
        bar.close()
        click.echo("torchgrade: interrupted; every submission graded so far is recorded: run the same command "
                   "to grade the rest", err=True)
        if isinstance(e, _Terminated):  # asked to stop: no interpreter teardown of seconds (torch is loaded)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(143)
        sys.exit(130)
    finally:
        signal.signal(signal.SIGTERM, previous)
        bar.close()
    for line in summary_lines(result.records, result.graded, result.skipped, result.crashed, result.seconds):
        click.echo(line)
    click.echo(f"graded {len(result.grades)} submission(s) into {out}")


@main.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder for the whole class: every submission's folder, index.html, grades.csv, junit.xml.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
@click.option("--private", is_flag=True, help=PRIVATE_HELP)
def merge(shards: tuple[Path, ...], out: Path, assignment_path: str | None, private: bool) -> None:
    """Combine the output folders of `torchgrade grade --shard i/n` runs into one class report."""
    from torchgrade.classroom.batch import OutputBusy, locked, write_class_pages, write_outputs
    from torchgrade.classroom.ledger import Ledger
    from torchgrade.classroom.overrides import Overrides, OverridesError
    from torchgrade.engine.results import set_private
    from torchgrade.classroom.shards import MergeError, merge as merge_shards

    set_private(private)
    assignment = _assignment(assignment_path)
    if out.exists() and not out.is_dir():
        _fail(f"{out}: exists and is not a folder")
    for folder in shards:  # before anything is written
        if not Ledger(folder).path.is_file():
            _fail(f"{folder}: no {Ledger(folder).path.name} (not a folder written by `torchgrade grade`)")
    try:  # the instructor's decisions (OUT/overrides.yaml), checked against the whole class before anything is written
        decisions = Overrides.load(out, assignment, {name for folder in shards for name in Ledger(folder).load()})
    except OverridesError as e:
        _fail(str(e))
    try:
        with locked(out):
            grades, records = merge_shards(list(shards), out)
            for grade, record in zip(grades, records):
                before = grade.adjustments
                decisions.apply(grade, record.content)
                if grade.adjustments != before:  # the shard's pages predate the decisions
                    write_outputs(grade, assignment, out)
            decisions.remember()
            write_class_pages(grades, assignment, out)
    except (MergeError, OutputBusy) as e:
        _fail(str(e))
    click.echo(f"merged {len(grades)} submission(s) from {len(shards)} shard(s) into {out}")


@main.command()
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("dist"),
              show_default=True, help="Where to write autograder.zip.")
@click.option("--device", type=click.Choice(["cpu", "all"]), default="all", show_default=True,
              help="Devices the autograder grades on. Gradescope's machines have no GPU: with `all` the CUDA checks "
                   "follow the course's cuda_standin, as `check`, `grade` and the bundle do (one score on every path).")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def gradescope(out: Path, device: str, assignment_path: str | None) -> None:
    """Build a Gradescope autograder (OUT/autograder.zip) for this course.

    Upload it as the assignment's autograder: setup.sh installs torch (CPU) and every other package at
    the exact versions tested here (engine/requirements.lock), then grades the reference (the build
    fails unless it scores full marks); run_autograder grades each submission, in a sandbox it proves
    first (see docs/exports.md), and writes Gradescope's results.json.
    """
    from torchgrade.outputs.gradescope import GradescopeError, build

    assignment = _assignment(assignment_path, checks="collect")
    try:
        built = build(assignment, out, device)
    except GradescopeError as e:
        _fail(str(e))
    click.echo(f"wrote {built.zip} ({len(built.files)} files): upload it as the autograder on Gradescope")


@main.command(hidden=True)
@click.argument("submission", type=click.Path(path_type=Path))
@click.option("--results", "results_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
@click.option("--secret", "secrets", multiple=True, type=click.Path(path_type=Path),
              help="A file or folder the sandbox user must not read (besides the course's reference, checks "
                   "and assignment file); proven before grading.")
@click.option("--protect", "protected", multiple=True, type=click.Path(path_type=Path),
              help="A file or folder the sandbox user must not write (besides results.json's folder and the engine).")
@click.option("--smoke", is_flag=True, help="Exit 1 unless every check passed (the build's test on the reference).")
@click.option("--metadata", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Gradescope's submission_metadata.json, for the course's submission_limit.")
@click.option("--reference-outcomes", "outcomes", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="A folder where the reference's outcomes are recorded once (by the build's test) and reused "
                   "(torchgrade/engine/refcache.py).")
def autograde(submission: Path, results_path: Path, device: str, assignment_path: str | None,
              secrets: tuple[Path, ...], protected: tuple[Path, ...], smoke: bool, outcomes: Path | None,
              metadata: Path | None) -> None:
    """Grade one Gradescope submission folder into results.json (what run_autograder calls)."""
    from torchgrade.base.paths import PACKAGE
    from torchgrade.classroom import autograder

    assignment = _assignment(assignment_path)
    if not submission.is_dir():
        _fail(f"{submission}: no such folder (Gradescope puts the submission there)")
    engine = [PACKAGE, Path(sys.prefix) / "bin"]
    sys.exit(autograder.autograde(submission, results_path, device, assignment, list(secrets),
                                  [*protected, *secrets, *engine], smoke=smoke, outcomes=outcomes,
                                  metadata=metadata))


@main.command()
@click.argument("lms", type=click.Choice(["canvas", "moodle"]))
@click.argument("graded", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The CSV file to write.")
@click.option("--roster", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The class list as a CSV: the LMS's own gradebook export works (Canvas: ID, SIS User ID, SIS "
                   "Login ID; Moodle: Email address, ID number or Username); a 'submission' column maps folder "
                   "names. Needed for Moodle; for Canvas, the IDs in Canvas download names are enough.")
@click.option("--column", default=None, help="The gradebook column to fill (default: the assignment's title; for "
                                             "an existing Canvas assignment use its header, e.g. 'HW1 (12345)').")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def export(lms: str, graded: Path, output: Path, roster: Path | None, column: str | None,
           assignment_path: str | None) -> None:
    """Write a gradebook LMS imports as it is, from GRADED (the --out folder of `torchgrade grade`).

    Exit status 1 when a submission matches no student (each is listed with the reason).
    """
    from torchgrade.classroom.gradebook import graded_class
    from torchgrade.outputs.lms import LMSError, canvas_csv, moodle_csv, read_roster
    from torchgrade.engine.results import write_atomic

    assignment = _assignment(assignment_path)
    if lms == "moodle" and roster is None:
        _fail("moodle needs --roster (Moodle's download names carry no user ID Moodle can import by)")
    try:
        grades = graded_class(graded, assignment)  # with the instructor's decisions (GRADED/overrides.yaml)
        rows = read_roster(roster) if roster else None
        text, matching = (canvas_csv if lms == "canvas" else moodle_csv)(grades, assignment, rows, column)
    except LMSError as e:
        _fail(str(e))
    write_atomic(output, text)
    click.echo(f"wrote {output}: {len(grades) - len(matching.unmatched)} of {len(grades)} submission(s) matched")
    for row in matching.missing:
        who = next((v for v in row.values() if v), "?")
        click.echo(f"no submission: {who}", err=True)
    for name, why in matching.unmatched:
        click.echo(f"unmatched: {name}: {why}", err=True)
    if matching.unmatched:
        sys.exit(1)


@main.command()
@click.argument("graded", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--known", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A folder of known solutions (last term's, from the web): each subfolder one source, compared "
                   "with every student as the reference is.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="List pairs at least this similar (0 to 1; default 0.6).")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def similarity(graded: Path, known: Path | None, threshold: float | None, assignment_path: str | None) -> None:
    """Rank pairs of students with similar code, target by target: GRADED/similarity.html (after `grade`).

    Renaming and reformatting do not hide a copy; the stub's code is left out; the reference and --known
    are compared with every student. See docs/class-grading.md.
    """
    from torchgrade.classroom import similarity as sim
    from torchgrade.classroom.batch import report_link, write_class_pages
    from torchgrade.classroom.gradebook import graded_class
    from torchgrade.outputs.lms import LMSError
    from torchgrade.engine.results import write_atomic

    assignment = _assignment(assignment_path)
    names = tuple(e.name for e in assignment.exercises)
    students = sim.class_code(graded, names)
    if not any(students.values()):
        _fail(f"{graded}: no student code kept there (grade the class with this torchgrade version first: "
              f"`torchgrade grade ... --out {graded}`)")
    sources = {"reference": sim.modules(assignment.reference_dir, names)}
    if known is not None:
        sources.update(sim.known_sources(known, names))
    report = sim.analyse(students, assignment, sources, sim.THRESHOLD if threshold is None else threshold)
    write_atomic(graded / sim.PAGE, sim.render(report, assignment, {name: report_link(name) for name in students}))
    try:
        grades = graded_class(graded, assignment)
    except LMSError as e:  # the page is written; the index cannot be
        click.echo(f"torchgrade: note: index.html not rewritten: {e}", err=True)
        grades = []
    if len(grades) > 1:
        write_class_pages(grades, assignment, graded)  # index.html links to the new page
    click.echo(f"wrote {graded / sim.PAGE}: {report.count} pair(s) at {report.threshold:.0%} or more, "
               f"{len(students)} student(s), {len(sources)} source(s)")


@main.command()
@click.option("--check", "check_only", is_flag=True,
              help="Change nothing: list stubs that are out of date and docstrings without a Chinese summary; "
                   "exit 1 if any.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
@click.option("--notebook", "notebook_out", is_flag=False, flag_value="notebooks", default=None, metavar="[DIR]",
              help="Write (with --check: compare) the student notebooks instead: DIR/<module>.ipynb, one per "
                   "exercise (default DIR: notebooks/ in the course folder; docs/notebooks.md).")
def stubs(check_only: bool, assignment_path: str | None, notebook_out: str | None) -> None:
    """Generate the student stubs (exercises/) from the reference solutions' solution markers."""
    from torchgrade.authoring.stubs import MarkerError, docstring_problems, generate_stubs, make_stub

    assignment = _assignment(assignment_path, checks="collect")
    if notebook_out is not None:
        _stub_notebooks(assignment, assignment.root / notebook_out, check_only)
        return
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


def _stub_notebooks(assignment, out: Path, check_only: bool) -> None:
    """`stubs --notebook`: the student notebooks from the reference's stubs (torchgrade/engine/notebooks.py)."""
    from torchgrade.authoring.stubs import MarkerError
    from torchgrade.authoring.notebooks import generate_notebooks
    try:
        changed = generate_notebooks(assignment, out, write=not check_only)
    except (MarkerError, SyntaxError) as e:
        _fail(str(e))
    for path in changed:
        click.echo(f"{'out of date' if check_only else 'wrote'}: {path}")
    if not changed:
        click.echo(f"notebooks in {out} are up to date")
    elif check_only:
        click.echo("run `torchgrade stubs --notebook` to regenerate them", err=True)
        sys.exit(1)


@main.command()
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("dist"),
              show_default=True, help="Where to write the bundle folder and its .zip.")
@click.option("--name", default="student", show_default=True, help="The bundle's name: OUT/NAME/ and OUT/NAME.zip.")
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all",
              help="Devices to record expected outcomes on (default: all that are available; see torchgrade/authoring/bundle.py).")
@click.option("--verify", is_flag=True,
              help="Also grade the reference through the sandbox; refuse to build unless it scores full marks.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
@click.option("--notebook", is_flag=True, help="Also ship the student notebooks (notebooks/<module>.ipynb, made now "
                                               "from the stubs; docs/notebooks.md).")
def bundle(out: Path, name: str, device: str, verify: bool, assignment_path: str | None, notebook: bool) -> None:
    """Build the student bundle: stubs, visible checks, the engine and recorded expected outcomes.

    It holds no reference solutions and no hidden checks: the visible checks are run once on the
    reference here, and their expected outcomes are recorded into the bundle instead.
    """
    from torchgrade.authoring.bundle import BundleError, build_bundle
    from torchgrade.engine.grading import GradingError

    assignment = _assignment(assignment_path, checks="collect")
    try:
        built = build_bundle(assignment, out, name=name, device=device, verify=verify, notebooks=notebook)
    except (BundleError, GradingError) as e:
        _fail(str(e))
    recorded = ", ".join(f"{e} {n}" for e, n in built.recorded.items())
    click.echo(f"recorded expected outcomes on {', '.join(built.devices)}: {recorded}")
    click.echo(f"wrote {built.folder}/ ({len(built.files)} files) and {built.zip}")


@main.command()
@click.option("--markdown", is_flag=True, help="Print the built-in probes' reference page (docs/probes.md) instead.")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def probes(markdown: bool, assignment_path: str | None) -> None:
    """List the probes a check may ask for: the built-in ones, and this course's own (when in a course)."""
    from torchgrade.engine.probes import PROBES, options, reference_page
    from torchgrade.sandbox.probes import ProbeLoadError, load_course

    if markdown:
        click.echo(reference_page(), nl=False)
        return
    try:
        load_course(load_assignment(assignment_path).probes_dir)
    except ConfigError as e:
        if assignment_path:
            _fail(str(e))
    except ProbeLoadError as e:
        _fail(f"the course's probes do not import: {e}")
    for name, fn in sorted(PROBES.items(), key=lambda item: (not item[1].__module__.startswith("torchgrade."), item[0])):
        where = "built-in" if fn.__module__.startswith("torchgrade.") else f"course: {fn.__module__}"
        listed = ", ".join(f"{k}={v}" for k, v in options(fn).items())
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        click.echo(f"{name}({listed})  [{where}]\n    {summary}")


@main.command()
@click.argument("targets", nargs=-1)
@click.option("--seed", type=int, default=0, show_default=True, help="Which mutants --max-per-target picks.")
@click.option("--max-per-target", type=click.IntRange(min=1), default=None,
              help="Grade at most this many mutants per target, picked at random with --seed (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the audit as JSON instead of lines.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes (each imports torch once and grades many mutants).")
@click.option("--device", type=click.Choice(["cpu", "cuda", "all"]), default="all", help=DEVICE_HELP)
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to write index.html (default: reports/audit in the course folder).")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def audit(targets: tuple[str, ...], seed: int, max_per_target: int | None, as_json: bool, jobs: int, device: str,
          out: Path | None, assignment_path: str | None) -> None:
    """Measure the course's checks on mutants of its reference (each: one small mistake).

    TARGETS are exercises (tensors) or targets (tensors.view); none: all. Per target: the mutants
    made, killed by a visible check, killed only by hidden checks, and each survivor as a one-line
    diff; the visible checks no mutant fails or that add nothing over another; the reference's lines
    no check runs, the loops no check runs twice, the lines no mutant changes. Mark equivalent
    mutants in equivalent-mutants.yaml beside the checks folder (see docs/authoring.md): each mark
    is verified by a search of the audit's own around the checks' inputs, and one it tells apart is
    a survivor again.

    Exit status: 0 when every non-equivalent mutant is killed, every mark verified, every visible
    check kills one and none measures nothing (its reference raises what it does not expect), 1
    otherwise, 2 when the audit cannot run (a reference that fails its own checks).
    """
    import json

    from torchgrade.authoring.audit import AuditError, lines, run_audit
    from torchgrade.authoring.auditpage import write_page
    from torchgrade.engine.grading import GradingError
    from torchgrade.sandbox import host

    assignment = _assignment(assignment_path)
    for target in targets:
        if "::" in target:
            _fail(f"{target}: audit takes exercises or targets, not one check")
    _check_targets(assignment, targets)
    if jobs == 1:
        start_early(assignment.probes_dir)
    _check_course(assignment)
    try:
        if jobs == 1:
            host.started()
        result = run_audit(assignment, targets, seed=seed, max_per_target=max_per_target, jobs=jobs, device=device,
                           progress=None if as_json else lambda text: click.echo(text, err=True))
    except host.IsolationError as e:
        _fail(" ".join(str(e).split()))
    except (AuditError, GradingError) as e:
        _fail(" ".join(str(e).split()))
    page = (out or assignment.root / "reports" / "audit") / "index.html"
    write_page(result, page)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    else:
        for line in lines(result):
            click.echo(line)
        click.echo(f"report: {page}")
    if not result.clean:
        sys.exit(1)


@main.command()
@click.argument("folder", default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--title", default="My course", show_default=True, help="The course's title in reports.")
@click.option("--notebook", is_flag=True, help="Students work in notebooks: also write notebooks/<module>.ipynb "
                                               "(docs/notebooks.md).")
def init(folder: Path, title: str, notebook: bool) -> None:
    """Start a course in FOLDER (default: here): one example exercise with its reference, stub,
    checks, a probe of its own and a hint, that grades the reference full and the stub zero."""
    from torchgrade.authoring.scaffold import ScaffoldError, init_course

    try:
        written = init_course(folder, title, notebooks=notebook)
    except ScaffoldError as e:
        _fail(str(e))
    for path in written:
        click.echo(f"wrote {path}")
    inside = "" if folder.resolve() == Path.cwd().resolve() else f"cd {folder} && "
    stub = "torchgrade check --path notebooks" if notebook else "torchgrade check"
    click.echo(f"next: {inside}torchgrade check --path reference   (full marks), then {stub} (the stub: zero)")



@main.group()
def observer() -> None:
    """The sandbox's compiled watch of torch's dispatcher (docs/how-it-works.md)."""


@observer.command("build")
def observer_build() -> None:
    """Compile it now for this torch and Python (else the first grading starts a build in the background
    and uses torch's profiler until it is done); needs a C++ compiler and torch's headers."""
    from torchgrade.sandbox import observer as compiled

    try:
        click.echo(f"built: {compiled.build()}")
    except compiled.BuildError as e:
        _fail(f"the compiled observer cannot be built here ({e}); grading watches with torch's profiler")


if __name__ == "__main__":  # `python -m torchgrade.cli check` works without installing the package
    main()
