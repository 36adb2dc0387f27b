"""The instructor's commands: grade, merge, gradescope, autograde, export, similarity."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click

from torchgrade.sandbox.isolation import ENV_VAR as ISOLATION_ENV
from torchgrade.sandbox.isolation import LEVELS as ISOLATION_LEVELS
from torchgrade.cli.common import (ASSIGNMENT_HELP, DEVICE_HELP, PRIVATE_HELP, _assignment, _check_course,
                                   _course_notes, _fail, course_mistake, main)


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
    for line in summary_lines(result.records, result.graded, result.skipped, result.crashed, result.seconds,
                              [g.score for g in result.grades]):
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
        decisions = Overrides.load(out, assignment, {name for folder in shards for name in Ledger(folder).load()},
                                   graded=shards)
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


@main.command()
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
    """Grade one submission folder into results.json as the Gradescope autograder does (run_autograder runs it).

    To try a built autograder.zip on a submission here, run its run_autograder with AUTOGRADER_ROOT set:
    docs/exports.md, "Try it here"."""
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
@click.option("--json", "as_json", is_flag=True,
              help='Print {"pairs": [{"a", "b", "target", "similarity"}, ...]}: every (target, pair) row at or above '
                   "the threshold, for scripts (the page is written too).")
@click.option("--assignment", "assignment_path", default=None, help=ASSIGNMENT_HELP)
def similarity(graded: Path, known: Path | None, threshold: float | None, as_json: bool,
               assignment_path: str | None) -> None:
    """Rank pairs of students with similar code, target by target: GRADED/similarity.html (after `grade`).

    Pairs of people are ranked by evidence (target similarities weighted by how rare the shared code is);
    renaming, reformatting, reordering, rewritten loops, swapped operands and helpers do not hide a copy;
    the stub's code is left out; the reference and --known are compared with every student. See
    docs/class-grading.md.
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
    summary = (f"wrote {graded / sim.PAGE}: {report.student_pairs} pair(s) of students share a target at "
               f"{report.threshold:.0%} or more ({report.count} target row(s)), {len(students)} student(s), "
               f"{len(sources)} source(s)")
    if as_json:
        import json

        click.echo(json.dumps(sim.as_json(report), indent=1))
        click.echo(summary, err=True)
    else:
        click.echo(summary)
