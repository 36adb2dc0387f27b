"""The course author's commands: stubs, bundle, probes, audit, init, observer."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from torchgrade.engine.config import ConfigError, load_assignment
from torchgrade.sandbox.host import start_early
from torchgrade.cli.common import (ASSIGNMENT_HELP, DEVICE_HELP, _assignment, _check_course,
                                   _check_targets, _fail, main)


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
    devices = " and ".join(built.devices)
    if built.verified:
        click.echo(f"verified: the reference, graded through the sandbox as a submission, passed all {built.passed} "
                   f"visible checks on {devices}")
    click.echo(f"recorded expected outcomes on {devices}: {recorded}")
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
    is verified by a search of the audit's own (the mark's `input:` first, then around the checks'
    inputs); one that a check kills or an input tells apart is overturned.

    Exit status: 0 when every non-equivalent mutant is killed, every mark verified (none overturned), every visible
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
