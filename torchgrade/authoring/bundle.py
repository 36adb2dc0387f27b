"""The student bundle: stubs, visible checks, the engine and recorded expected outcomes, and nothing else.

A visible check computes its expected values by running the reference (torchgrade/engine/differential.py),
which students must not have. So the bundle is built by running the visible checks once on the
reference while ``differential.recording()`` is on, and it carries those outcomes instead, one
weights-only ``torch.save`` file per exercise in ``expected/``; its ``assignment.yaml`` points
``reference:`` there, and ``reference_outcome`` looks them up. The recordings hold only what the
probes report for the visible checks' own inputs (no tracebacks: they would quote the reference).

CUDA variants are recorded only where the bundle is built on a machine with CUDA. Elsewhere a
student's CUDA check uses the CPU recording of the same inputs with its tensors moved to the
input's device, and is skipped (its points set aside) when even that is missing.

Layout::

    README.md  assignment.yaml  pyproject.toml  bundle.json
    exercises/<module>.py          stubs, generated from reference/ now (never copied)
    notebooks/<module>.ipynb       with --notebook: the stubs as student notebooks, generated now too
    expected/<module>.pt           recorded outcomes of the visible checks
    torchgrade/                    the engine (it holds nothing of any course)
    graders/checks/visible/        the visible checks of the visible exercises (never hidden/)
    graders/probes/, hints.yaml    the course's own probes and hints, where it has them
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from torchgrade.base.paths import PACKAGE
from torchgrade.base.version import __version__
from torchgrade.authoring.stubs import make_stub
from torchgrade.engine.config import Assignment
from torchgrade.engine.differential import recording, save_recording
from torchgrade.engine.grading import grade_submission

ENGINE = PACKAGE
EXPECTED_DIR = "expected"
MANIFEST = "bundle.json"
#: How bundle.json's `recorded_on` names the CUDA stand-in, where the CUDA checks' outcomes were recorded on it.
STANDIN_DEVICE = "cuda (stand-in)"
#: Timestamp of every zip entry, so that the same bundle gives the same bytes.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class BundleError(Exception):
    """The bundle cannot be built as asked; the message says why."""


@dataclass(frozen=True)
class Bundle:
    """What `build_bundle` wrote."""

    folder: Path
    zip: Path
    files: tuple[str, ...]
    #: Recorded outcomes per exercise.
    recorded: dict[str, int]
    devices: tuple[str, ...]
    #: The visible checks the reference passed while recording (with `verify`: graded through the sandbox).
    passed: int = 0
    verified: bool = False


def _ignored(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo") or path.name.startswith(".")


def _visible_exercises(assignment: Assignment) -> list[str]:
    """Exercises students check themselves: visible, with a visible check file."""
    return [e.name for e in assignment.exercises
            if e.visibility == "visible" and (assignment.checks_dir / "visible" / f"test_{e.name}.py").is_file()]


def _checks_destination(assignment: Assignment) -> str:
    try:
        return assignment.checks_dir.relative_to(assignment.path.parent).as_posix()
    except ValueError:
        return "checks"


def _copy_engine(stage: Path) -> None:
    """The engine package as it is installed here."""
    for path in sorted(ENGINE.rglob("*")):
        relative = path.relative_to(ENGINE)
        if _ignored(relative) or path.is_dir():
            continue
        destination = stage / "torchgrade" / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)


def _copy_visible_checks(assignment: Assignment, stage: Path, exercises: list[str]) -> str:
    """The checks folder's own files (pytest.ini, README) and visible/ for `exercises`; never hidden/."""
    destination = _checks_destination(assignment)
    source = assignment.checks_dir
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if _ignored(relative) or path.is_dir() or relative.parts[0] == "hidden":
            continue
        if len(relative.parts) > 1 and relative.parts[0] != "visible":
            continue  # other folders of checks (fixtures of hidden checks, data) stay home
        if relative.parts[0] == "visible" and path.name.startswith("test_") and \
                path.stem.removeprefix("test_") not in exercises:
            continue
        target = stage / destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return destination


def _relative(assignment: Assignment, path: Path, fallback: str) -> str:
    try:
        return path.relative_to(assignment.root).as_posix()
    except ValueError:
        return fallback


def _copy_course_parts(assignment: Assignment, stage: Path) -> dict[str, str]:
    """The course's own probes and hints (public: students may read them), at the same places."""
    where = {}
    if assignment.probes_dir.is_dir():
        where["probes"] = _relative(assignment, assignment.probes_dir, "probes")
        for path in sorted(assignment.probes_dir.rglob("*.py")):
            relative = path.relative_to(assignment.probes_dir)
            if not _ignored(relative):
                (stage / where["probes"] / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, stage / where["probes"] / relative)
    if assignment.hints_file.is_file():
        where["hints"] = _relative(assignment, assignment.hints_file, "hints.yaml")
        (stage / where["hints"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(assignment.hints_file, stage / where["hints"])
    return where


def _write_stubs(assignment: Assignment, stage: Path) -> None:
    for exercise in assignment.exercises:
        reference = assignment.reference_dir / f"{exercise.name}.py"
        if not reference.is_file():
            raise BundleError(f"{reference}: no reference solution for exercise {exercise.name}")
        stub = make_stub(reference.read_text(encoding="utf-8"), str(reference))
        (stage / "exercises").mkdir(exist_ok=True)
        (stage / "exercises" / reference.name).write_text(stub, encoding="utf-8")


def _write_assignment(assignment: Assignment, stage: Path, checks: str, parts: dict[str, str]) -> None:
    data = yaml.safe_load(assignment.path.read_text(encoding="utf-8"))
    data.update(reference=EXPECTED_DIR, checks=checks, stubs="exercises", **parts)
    header = ("# The assignment, as the student bundle sees it: `reference:` points at the recorded expected\n"
              "# outcomes of the visible checks (expected/), not at reference solutions.\n")
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120, default_flow_style=None)
    (stage / "assignment.yaml").write_text(header + text, encoding="utf-8")


def torch_range(requirements: list[str]) -> dict[str, str]:
    """The torch versions `requirements` allow, in words per language ({"en": "2.7 or newer", "zh": ...}),
    so that the README says what the bundle's pyproject.toml says."""
    import re

    spec = next((r[len("torch"):].split(";")[0].strip() for r in requirements
                 if re.match(r"torch(?![\w.-])", r)), "")
    words = {"en": [], "zh": []}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        op, version = re.match(r"([<>=!~]*)\s*(.*)", part).groups()
        en, zh = {">=": (f"{version} or newer", f"{version} 或更新版本"), ">": (f"newer than {version}", f"高于 {version}"),
                  "<": (f"older than {version}", f"低于 {version}"), "<=": (f"{version} or older", f"{version} 或更早版本"),
                  "==": (version, version), "~=": (f"{version} or a later release of it", f"{version} 的兼容版本")
                  }.get(op, (part, part))
        words["en"].append(en)
        words["zh"].append(zh)
    return {"en": ", ".join(words["en"]) or "any version", "zh": "，".join(words["zh"]) or "任何版本"}


def _write_readme(assignment: Assignment, stage: Path, exercises: list[str], notebooks: bool = False,
                  folder: str = "student") -> None:
    rows = "\n".join(f"| `exercises/{e.name}.py` | {e.title}"
                     f"{'' if e.name in exercises else ' (hidden checks only / 仅隐藏检查)'} | {e.points:g} |"
                     for e in assignment.exercises)
    target = assignment.targets[0].qualname if assignment.targets else "tensors.view"

    def commands(lines: list[tuple[str, str]]) -> str:
        width = max(len(command) for command, _ in lines) + 2
        return "\n".join(f"{command:<{width}}# {comment}" for command, comment in lines)

    english = commands([("pip install .", "once: installs the `torchgrade` command"),
                        ("torchgrade check", "every visible check"),
                        (f"torchgrade check {target.split('.')[0]}", "one exercise module"),
                        (f"torchgrade check {target}", "one function or class"),
                        ("torchgrade check -x", "stop at the first failure"),
                        ("torchgrade check --lang zh", "messages in Chinese")])
    chinese = commands([("pip install .", "只需一次：安装 `torchgrade` 命令"),
                        ("torchgrade check --lang zh", "运行全部可见检查，中文输出"),
                        (f"torchgrade check {target} --lang zh", "只检查一个函数或类"),
                        ("torchgrade check -x --lang zh", "遇到第一个失败就停止")])
    template = (ENGINE / "templates" / "student_README.md").read_text(encoding="utf-8")
    hidden = (assignment.checks_dir / "hidden").is_dir() and any((assignment.checks_dir / "hidden").glob("test_*.py"))
    # what the README promises follows the course: Chinese docstrings only where `stubs --check` demands them
    example = target.split(".")[0]
    torch = torch_range(engine_requirements())
    settings = dict(
        torch_en=torch["en"], torch_zh=torch["zh"],
        notebooks_en=NOTEBOOKS_EN.format(module=example, target=target, folder=folder) if notebooks else "",
        notebooks_zh=NOTEBOOKS_ZH.format(module=example, target=target, folder=folder) if notebooks else "",
        docstrings_en=", in English and in Chinese" if assignment.chinese_summaries else "",
        docstrings_zh="用中英文" if assignment.chinese_summaries else "",
        hidden_en="These are the visible checks only. Your submission is also graded with hidden checks (other "
                  "inputs), so test beyond them.\n" if hidden else "",
        hidden_zh="这里只有可见检查。提交后还会用隐藏检查（其它输入）评分，请不要只满足于可见检查。\n" if hidden else "")
    (stage / "README.md").write_text(template.format(title=assignment.title, rows=rows, english=english,
                                                     chinese=chinese, **settings), encoding="utf-8")


#: The README's section on the notebooks, where the bundle has them (`bundle --notebook`).
NOTEBOOKS_EN = """
## Working in Jupyter or Colab

`notebooks/` holds the same exercises as notebooks, one per module (`notebooks/{module}.ipynb` for
`exercises/{module}.py`). Start Jupyter in this folder (`pip install jupyterlab`, then `jupyter lab`; in Colab,
upload this folder, `!pip install -q ./{folder}` and `%cd {folder}`), open a notebook, run its first cell
(`%load_ext torchgrade`), write each function in its cell and run the check cell below it
(`%torchgrade check {target}`). A failing check prints a `rerun:` line: paste it into a cell to run that
check again. From a terminal in this folder, `torchgrade check --path notebooks` checks the saved notebooks.
Hand in each notebook under its own name (`{module}.ipynb` for `{module}`).
"""
NOTEBOOKS_ZH = """
### 在 Jupyter 或 Colab 中练习

`notebooks/` 中是同样的练习，每个模块一个 notebook（`notebooks/{module}.ipynb` 对应 `exercises/{module}.py`）。
在本目录中启动 Jupyter（`pip install jupyterlab`，然后 `jupyter lab`；在 Colab 中上传本目录，运行
`!pip install -q ./{folder}` 和 `%cd {folder}`），打开 notebook，先运行第一个单元（`%load_ext torchgrade`），
在各自的单元中实现函数，再运行它下面的检查单元（`%torchgrade check {target}`）。检查未通过时会打印一行
`rerun:`，把它粘贴到一个单元中运行即可单独重跑这项检查。在本目录的终端中，`torchgrade check --path notebooks`
检查已保存的 notebook。提交时保留每个 notebook 的文件名（`{module}` 对应 `{module}.ipynb`）。
"""


class _NoMetadata(Exception):
    pass


def engine_requirements() -> list[str]:
    """What the engine needs installed (no extras), from its installed metadata (editable, wheel or index),
    else from the pyproject.toml of the checkout it runs from."""
    import importlib.metadata

    try:
        requires = importlib.metadata.requires("torchgrade")
        if requires is None:
            raise _NoMetadata
    except (importlib.metadata.PackageNotFoundError, _NoMetadata):
        source = ENGINE.parent / "pyproject.toml"
        try:
            import tomllib  # novermin: Python 3.10 has none; the except below says so

            requires = tomllib.loads(source.read_text(encoding="utf-8"))["project"]["dependencies"]
        except (ImportError, OSError, KeyError) as e:
            raise BundleError(f"cannot tell what torchgrade needs installed: it has no package metadata and "
                              f"{source} cannot be read ({e}); install torchgrade (pip install .) first") from None
    return [r for r in requires if "extra ==" not in r.replace("extra==", "extra ==")]


def _package_data() -> list[str]:
    """The engine's files that are not Python modules (templates, checks.ini), as setuptools patterns."""
    return sorted({(p.parent.relative_to(ENGINE) / f"*{p.suffix}").as_posix()
                   for p in ENGINE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc", ".pyo")
                   and not _ignored(p.relative_to(ENGINE))})


def _write_pyproject(stage: Path) -> None:
    """A pyproject.toml written for the bundle (never copied: a wheel or index install has none to copy),
    so that one `pip install .` in the bundle gives the `torchgrade` command. Requirements are ranges:
    a student's torch that satisfies them is kept."""
    def strings(values) -> str:
        return "[" + ", ".join(json.dumps(v) for v in values) + "]"  # a JSON string is a TOML basic string

    text = f"""# Written by `torchgrade bundle`: `pip install .` here installs the engine below as the `torchgrade` command.
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "torchgrade"
version = {json.dumps(__version__)}
description = "The torchgrade engine of this student bundle"
requires-python = ">=3.10"
dependencies = {strings(engine_requirements())}

[project.scripts]
torchgrade = "torchgrade.cli:main"

[tool.setuptools.packages.find]
include = ["torchgrade*"]

[tool.setuptools.package-data]
torchgrade = {strings(_package_data())}
"""
    (stage / "pyproject.toml").write_text(text, encoding="utf-8")


def _zip(folder: Path, destination: Path) -> None:
    tmp = destination.with_name(f".{destination.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"{folder.name}/{path.relative_to(folder).as_posix()}", _ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    os.replace(tmp, destination)


def record_expected(assignment: Assignment, exercises: list[str], device: str = "all", verify: bool = False):
    """Run the visible checks once on the reference, recording every reference outcome they ask for.

    Returns (recordings per exercise, the devices graded (the CUDA stand-in as `STANDIN_DEVICE`), how many
    checks passed). With `verify`, the reference is also graded
    as a submission, through the sandbox, and BundleError is raised unless it scores full marks;
    otherwise checks see the reference's outcome on both sides (fast, no sandbox).
    """
    with recording(reference_only=not verify) as recorded:
        grade = grade_submission(assignment.reference_dir, assignment, device=device, include_hidden=False,
                                 only=tuple(exercises))
    wrong = [t for t in grade.tests if t.status in ("failed", "error")]
    if wrong:
        listing = "\n".join(f"  {t.name}: {t.output.splitlines()[0] if t.output else t.status}" for t in wrong[:10])
        raise BundleError(f"the reference fails {len(wrong)} of its own visible checks:\n{listing}")
    # the CUDA checks graded on the stand-in recorded their outcomes too: the bundle says so
    devices = tuple(grade.devices) + ((STANDIN_DEVICE,) if grade.standin else ())
    return recorded, devices, sum(1 for t in grade.tests if t.status == "passed")


def build_bundle(assignment: Assignment, out: Path, *, name: str = "student", device: str = "all",
                 verify: bool = False, notebooks: bool = False) -> Bundle:
    """Write the student bundle as the folder `out/name` and the archive `out/name.zip`; return what it holds.
    With `notebooks`, also notebooks/<module>.ipynb, made from the stubs now (never copied, never stale)."""
    exercises = _visible_exercises(assignment)
    if not exercises:
        raise BundleError(f"no visible checks in {assignment.checks_dir / 'visible'} for the visible exercises")
    folder = out / name
    if folder.exists() and not (folder / MANIFEST).is_file():
        raise BundleError(f"{folder} exists and is not a bundle; choose another --out or --name")
    recorded, devices, passed = record_expected(assignment, exercises, device, verify)
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out))
    try:
        _write_stubs(assignment, stage)
        if notebooks:
            from torchgrade.authoring.notebooks import generate_notebooks
            generate_notebooks(assignment, stage / "notebooks")
        _copy_engine(stage)
        checks = _copy_visible_checks(assignment, stage, exercises)
        parts = _copy_course_parts(assignment, stage)
        for exercise in exercises:
            save_recording(recorded.get(exercise, {}), stage / EXPECTED_DIR / f"{exercise}.pt", list(devices))
        _write_assignment(assignment, stage, checks, parts)
        _write_readme(assignment, stage, exercises, notebooks, name)
        _write_pyproject(stage)
        files = tuple(sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file()))
        manifest = {"assignment": assignment.title, "torchgrade": __version__, "recorded_on": list(devices),
                    "recorded": {e: len(recorded.get(e, {})) for e in exercises}, "files": [*files, MANIFEST]}
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        stage.chmod(0o755)  # mkdtemp made it private; the bundle is for sharing
        if folder.exists():
            shutil.rmtree(folder)
        stage.rename(folder)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    archive = out / f"{name}.zip"
    _zip(folder, archive)
    return Bundle(folder=folder, zip=archive, files=(*files, MANIFEST),
                  recorded={e: len(recorded.get(e, {})) for e in exercises}, devices=devices, passed=passed,
                  verified=verify)
