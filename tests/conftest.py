"""Shared helpers: build a submission from the reference with one change, grade it, read the points."""

from __future__ import annotations

import ast
import shutil
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from torchgrade.engine.config import load_assignment
from torchgrade.engine import plugin, session
from torchgrade.engine.scoring import Grade

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """`-n N` with xdist's default scheduling: worksteal instead (a worker that runs out of tests takes the
    other's last ones), so that the workers finish together. An explicit --dist is kept."""
    if getattr(config.option, "dist", "no") == "load" and not any(
            arg.startswith("--dist") for arg in config.invocation_params.args):
        config.option.dist = "worksteal"


def pytest_collection_modifyitems(items):
    """Tests marked `heavy` (a minute or more: a fresh environment, four grading paths, a simulated OS) run
    first: xdist's workers then share the many short tests at the end, instead of one worker finishing a
    heavy test alone while the other has nothing left (docs/performance.md, the suite)."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # (stable: the order otherwise kept)


@pytest.fixture(autouse=True, scope="session")
def _own_reference_cache(tmp_path_factory, worker_id):
    """`torchgrade check` keeps the reference's outcomes between runs (torchgrade/engine/refcache.py): the
    tests' runs keep theirs in a folder of the test run's, not in the user's cache, one for all its xdist
    workers (as for two `check`s of one user at once: a file per key, each written whole and signed), so that
    what one worker computed the other does not compute again."""
    import os

    folder = tmp_path_factory.getbasetemp().parent / "reference-cache" if worker_id != "master" \
        else tmp_path_factory.mktemp("reference-cache")  # (under xdist: the run's folder, above the workers')
    os.environ.setdefault("TORCHGRADE_CACHE_DIR", str(folder))


@pytest.fixture(autouse=True, scope="session")
def _compiled_observer():
    """The sandbox's compiled watch (torchgrade/sandbox/observer.py), built once per machine into the user's
    cache (before `_own_reference_cache` moves it) and named for every grading of the session: the tests
    grade with the watch users get. Where it cannot be built, they grade with the profiler."""
    import os

    from torchgrade.sandbox import observer

    if os.environ.get(observer.ENV_VAR):
        return
    saved = os.environ.pop("TORCHGRADE_CACHE_DIR", None)
    try:
        os.environ[observer.ENV_VAR] = str(observer.build())
    except observer.BuildError:
        os.environ[observer.ENV_VAR] = "off"
    finally:
        if saved is not None:
            os.environ["TORCHGRADE_CACHE_DIR"] = saved


@pytest.fixture(autouse=True)
def _ctrl_c_as_a_terminal_leaves_it():
    """Each test starts with Ctrl-C as a shell's foreground job has it: whatever ran before in this xdist
    worker (a test, a library, an import) and left SIGINT ignored or blocked would otherwise make every
    subprocess the test starts ignore it too (a Python started with SIGINT ignored keeps it so)."""
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.fixture(scope="session")
def assignment():
    return load_assignment(ROOT / "assignment.yaml")


def make_submission(folder: Path, *, base: str = "reference", replace: dict[str, list[tuple[str, str]]] | None = None,
                    append: dict[str, str] | None = None, files: dict[str, str] | None = None,
                    drop: tuple[str, ...] = ()) -> Path:
    """A submission folder: copies of `base`/*.py, with snippet replacements, appended code and extra files.

    `replace` maps a module to (old, new) pairs; each `old` must occur exactly once, so a test
    breaks loudly when the reference changes under it. `append` adds code at the end of a module
    (a redefinition there replaces the reference's version).
    """
    folder.mkdir(parents=True, exist_ok=True)
    for path in (ROOT / base).glob("*.py"):
        if path.stem not in drop:
            shutil.copy(path, folder / path.name)
    for module, pairs in (replace or {}).items():
        path = folder / f"{module}.py"
        text = path.read_text()
        for old, new in pairs:
            assert text.count(old) == 1, f"{module}.py: expected exactly one {old!r}"
            text = text.replace(old, new)
        path.write_text(text)
    for module, code in (append or {}).items():
        path = folder / f"{module}.py"
        path.write_text(path.read_text() + "\n\n" + textwrap.dedent(code))
    for name, content in (files or {}).items():
        (folder / name).write_text(textwrap.dedent(content))
    return folder


def points_by_target(grade: Grade) -> dict[str, tuple[float, float]]:
    """{"exercise.target": (score, max_score)} for a grade."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for t in grade.tests:
        totals[f"{t.exercise}.{t.target}"][0] += t.score
        totals[f"{t.exercise}.{t.target}"][1] += t.max_score
    return {k: (round(s, 6), round(m, 6)) for k, (s, m) in totals.items()}


def lost_targets(grade: Grade) -> set[str]:
    """The targets that did not get full marks."""
    return {k for k, (s, m) in points_by_target(grade).items() if s < m - 1e-9}


@pytest.fixture
def grade(assignment, tmp_path):
    """grade(only=("tensors",), **make_submission_kwargs) -> Grade, on CPU.

    Graded by this xdist worker's kept session for those checks (torchgrade/engine/session.py, as a batch
    worker grades a class): the checks are collected once per worker, not once per grading (a pytest.main
    each, about 0.65 s). tests/test_batch.py holds that a kept session grades exactly as grade_submission."""
    counter = iter(range(1000))

    def run(only: tuple[str, ...] = (), device: str = "cpu", **changes) -> Grade:
        folder = make_submission(tmp_path / f"submission{next(counter)}", **changes)
        return kept_grade(folder, assignment, device=device, only=only)

    return run


def kept_grade(folder: Path, assignment, *, device: str = "cpu", only: tuple[str, ...] = ()) -> Grade:
    """grade_submission(folder, assignment, device=device, only=only), by this xdist worker's kept session of
    all the assignment's checks (collected once per worker), running those that `only` names."""
    def chosen(item: pytest.Item) -> bool:
        return not only or any(plugin._selected(item, name) for name in only)

    return session.shared(assignment, device, ()).grade(folder, select=chosen)


def failures(grade: Grade, target: str) -> list[str]:
    """The messages of the failed or errored checks of one target ("exercise.target")."""
    return [t.output for t in grade.tests if f"{t.exercise}.{t.target}" == target and t.status in ("failed", "error")]


def checks_of(source: str, targets) -> str:
    """A check module's source less the checks of every target not in `targets` (its helpers kept)."""
    lines = source.splitlines(keepends=True)
    for node in reversed(ast.parse(source).body):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            marker = next((d.args[0].value for d in node.decorator_list if isinstance(d, ast.Call)
                           and getattr(d.func, "attr", "") == "target"), None)
            if marker not in targets:
                start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
                del lines[start:node.end_lineno]
    return "".join(lines)


def small_course(folder: Path, targets: dict[str, dict[str, float]], title: str = "Small") -> Path:
    """An assignment over a few targets of this course, fast to grade: its check files hold only those
    targets' checks (an assignment lists whole exercises; a check for a target it lacks is an error)."""
    checks = folder / "checks"
    for exercise, names in targets.items():
        for side in ("visible", "hidden"):
            (checks / side).mkdir(parents=True, exist_ok=True)
            (checks / side / f"test_{exercise}.py").write_text(
                checks_of((ROOT / "graders" / "checks" / side / f"test_{exercise}.py").read_text(), names))
    entries = "".join(f"  {exercise}:\n    targets:\n" + "".join(f"      {n}: {p}\n" for n, p in names.items())
                      for exercise, names in targets.items())
    path = folder / "small.yaml"
    path.write_text(f"title: {title}\nreference: {ROOT / 'reference'}\nchecks: {checks}\nstubs: {ROOT / 'exercises'}\n"
                    f"probes: {ROOT / 'graders' / 'probes'}\nhints: {ROOT / 'graders' / 'hints.yaml'}\n"
                    f"exercises:\n{entries}")
    return path
