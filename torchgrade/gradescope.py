"""A Gradescope autograder for the current course: `torchgrade gradescope --out DIR` builds DIR/autograder.zip.

The zip follows Gradescope's "Autograder Specifications"
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): `setup.sh` and `run_autograder`
at its root; Gradescope unpacks it into /autograder/source, runs setup.sh once when it builds the
image (the only time anything is downloaded: torch's CPU build, then the engine from `engine/`),
and run_autograder for each submission, which grades /autograder/submission and writes
/autograder/results/results.json (torchgrade's results.json is Gradescope's format already).

The course's reference and checks (in `course/`, with its assignment file, probes and hints) are
made readable by root only, at setup and again before each run: the student's code runs in the sandbox as another
user (under bubblewrap it does not even see those folders), so it cannot read the reference or
the hidden checks. `AUTOGRADER_ROOT` moves /autograder elsewhere (the tests grade in a temporary one).
"""

from __future__ import annotations

import importlib.metadata
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from .config import Assignment

ENGINE = Path(__file__).resolve().parent
#: Where the course goes inside the zip, and its parts inside that (the assignment file is rewritten to match).
COURSE = "course"
LAYOUT = {"reference": "reference", "checks": "graders/checks", "stubs": "exercises", "probes": "graders/probes",
          "hints": "graders/hints.yaml"}

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image: the only time anything is
# downloaded. Made by `torchgrade gradescope` (torchgrade {version}).
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
if command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -qq python3 python3-venv python3-pip bubblewrap >/dev/null \\
    || apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
fi
python3 -m venv "$ROOT/venv"
# torch's CPU build (Gradescope has no GPU): the default index would pull gigabytes of CUDA libraries.
"$ROOT/venv/bin/pip" install -q --index-url https://download.pytorch.org/whl/cpu "torch=={torch}"
"$ROOT/venv/bin/pip" install -q "$SOURCE/engine"
# The reference and the checks, hidden ones included: root's only (the probes stay readable: the
# sandbox runs them).
chmod -R go-rwx "$SOURCE/{course}/{reference}" "$SOURCE/{course}/{checks}"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: grade $ROOT/submission, write $ROOT/results/results.json.
# Made by `torchgrade gradescope` (torchgrade {version}). Nothing is downloaded here.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
if [ -x "$ROOT/venv/bin/torchgrade" ]; then PATH="$ROOT/venv/bin:$PATH"; fi
export PIP_NO_INDEX=1
chmod -R go-rwx "$SOURCE/{course}/{reference}" "$SOURCE/{course}/{checks}"
mkdir -p "$ROOT/results"
cd "$SOURCE/{course}"
exec torchgrade autograde "$ROOT/submission" --results "$ROOT/results/results.json" \\
  --assignment "$SOURCE/{course}/assignment.yaml" --device {device}
"""


class GradescopeError(Exception):
    """The autograder cannot be built (a part of the course is missing)."""


@dataclass(frozen=True)
class Built:
    zip: Path
    files: tuple[str, ...]


def _ignored(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo") or path.name.startswith(".")


def _copy_tree(source: Path, destination: Path) -> None:
    if source.is_file():
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
        return
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if _ignored(relative) or not path.is_file():
            continue
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination / relative)


def _engine_project() -> str:
    """A pyproject.toml that installs the engine as it is installed here, with the same dependencies."""
    try:
        requires = [r for r in importlib.metadata.requires("torchgrade") or [] if "extra ==" not in r]
        version = importlib.metadata.version("torchgrade")
    except importlib.metadata.PackageNotFoundError:
        from . import __version__

        requires, version = ["torch", "pytest", "pyyaml", "jinja2", "click", "tqdm", "msgpack", "numpy"], __version__
    deps = ",\n    ".join(f'"{r}"' for r in requires)
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "torchgrade"
version = "{version}"
requires-python = ">=3.10"
dependencies = [
    {deps}
]

[project.scripts]
torchgrade = "torchgrade.cli:main"

[tool.setuptools.packages.find]
include = ["torchgrade*"]

[tool.setuptools.package-data]
torchgrade = ["templates/*.html", "checks.ini"]
"""


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def stage(assignment: Assignment, folder: Path, device: str = "cpu") -> list[str]:
    """Write the autograder's files into folder (what the zip holds); return their relative paths."""
    from . import __version__

    course = folder / COURSE
    for key, part in (("reference", assignment.reference_dir), ("checks", assignment.checks_dir)):
        if not part.is_dir():
            raise GradescopeError(f"{part}: no such folder (the course's {key})")
        _copy_tree(part, course / LAYOUT[key])
    for key, part in (("stubs", assignment.stubs_dir), ("probes", assignment.probes_dir),
                      ("hints", assignment.hints_file)):
        if part.exists():
            _copy_tree(part, course / LAYOUT[key])
    data = yaml.safe_load(assignment.path.read_text(encoding="utf-8")) or {}
    data.update(LAYOUT)  # the parts where they are in the zip, wherever the course keeps them
    (course / "assignment.yaml").write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False),
                                            encoding="utf-8")
    _copy_tree(ENGINE, folder / "engine" / "torchgrade")
    (folder / "engine" / "pyproject.toml").write_text(_engine_project(), encoding="utf-8")
    values = {"version": __version__, "torch": _torch_version(), "course": COURSE, "device": device,
              "reference": LAYOUT["reference"], "checks": LAYOUT["checks"]}
    (folder / "setup.sh").write_text(SETUP_SH.format(**values), encoding="utf-8")
    (folder / "run_autograder").write_text(RUN_AUTOGRADER.format(**values), encoding="utf-8")
    for script in ("setup.sh", "run_autograder"):
        (folder / script).chmod(0o755)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def build(assignment: Assignment, out: Path, device: str = "cpu") -> Built:
    """DIR/autograder.zip: setup.sh and run_autograder at its root, the engine and the course beside them."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="torchgrade-gradescope-") as tmp:
        files = stage(assignment, Path(tmp), device)
        path = out / "autograder.zip"
        partial = out / ".autograder.zip.partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
            for name in files:
                source = Path(tmp) / name
                info = zipfile.ZipInfo.from_file(source, name)
                info.compress_type = zipfile.ZIP_DEFLATED
                executable = name in ("setup.sh", "run_autograder")
                info.external_attr = ((stat.S_IFREG | (0o755 if executable else 0o644)) << 16)
                z.writestr(info, source.read_bytes())
        partial.replace(path)
    return Built(path, tuple(files))


def find_submission(folder: Path, exercises: tuple[str, ...]) -> Path:
    """Where the student's files are in Gradescope's submission folder: itself, the one folder that holds
    an exercise file, or a .zip uploaded as it is."""
    if any((folder / f"{name}.py").is_file() for name in exercises):
        return folder
    nested = sorted((p for p in folder.rglob("*.py") if p.stem in exercises and "__MACOSX" not in p.parts),
                    key=lambda p: (len(p.parts), str(p)))
    if nested:
        return nested[0].parent
    zips = sorted(folder.glob("*.zip"))
    return zips[0] if len(zips) == 1 else folder
