"""A Gradescope autograder for the current course: `torchgrade gradescope --out DIR` builds DIR/autograder.zip.

The zip follows Gradescope's "Autograder Specifications"
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): `setup.sh` and `run_autograder`
at its root; Gradescope unpacks it into /autograder/source, runs setup.sh once when it builds the
image (the only time anything is downloaded: torch's CPU build, then the engine from `engine/`),
and run_autograder for each submission, which grades /autograder/submission and writes
/autograder/results/results.json (torchgrade's results.json is Gradescope's format already).

setup.sh installs exactly the versions tested here (engine/requirements.lock, written by `lock`), then
grades the reference as a submission (the build's test: the image is not built unless it scores full
marks), which records the reference's outcomes for every submission to reuse.

What run_autograder runs for each submission (`torchgrade autograde`) is
torchgrade/classroom/autograder.py.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import stat
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from torchgrade.base.paths import PACKAGE
from torchgrade.engine.config import Assignment

ENGINE = PACKAGE
#: Where the course goes inside the zip, and its parts inside that (the assignment file is rewritten to match).
COURSE = "course"
LAYOUT = {"reference": "reference", "checks": "graders/checks", "stubs": "exercises", "probes": "graders/probes",
          "hints": "graders/hints.yaml"}

#: Where the permissions of the image are set: nothing of the course but its probes (which the sandbox
#: loads), nor the submission's metadata (earlier results), is readable by the sandbox user; nothing of
#: /autograder is writable by it. Run at setup and again before each submission (Gradescope may unpack anew).
LOCK_DOWN = """chmod go+x "$ROOT"  # the sandbox user runs the venv's Python: it must enter /autograder (not list it)
chmod -R go-rwx "$SOURCE/{course}"
chmod go+x "$SOURCE/{course}" "$SOURCE/{course}/graders"
if [ -d "$SOURCE/{course}/{probes}" ]; then chmod -R go+rX "$SOURCE/{course}/{probes}"; fi
if [ -e "$ROOT/submission_metadata.json" ]; then chmod go-rwx "$ROOT/submission_metadata.json"; fi
chmod -R go-w "$SOURCE"
mkdir -p "$ROOT/results" && chmod 0755 "$ROOT/results"
"""
#: What `torchgrade autograde` is told besides the course: what the sandbox user must not read, or write.
AUTOGRADE_ARGS = """--assignment "$SOURCE/{course}/assignment.yaml" --device {device} \\
  --reference-outcomes "$ROOT/{outcomes}" --secret "$ROOT/{outcomes}" \\
  --secret "$ROOT/submission_metadata.json" --metadata "$ROOT/submission_metadata.json" \\
  --protect "$SOURCE" --protect "$ROOT/submission\""""
#: Where the reference's outcomes, recorded by the build's test, are kept (root's only: they may hold the
#: answers of hidden checks' inputs).
OUTCOMES = "reference-outcomes"

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image: the only time anything is
# downloaded. Made by `torchgrade gradescope` (torchgrade {version}, tested on Python {python}).
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
if command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq python3 python3-venv python3-pip bubblewrap >/dev/null \\
    || apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
  # the Python the versions in engine/requirements.lock were tested on, where the distribution has it
  apt-get install -y -qq python{python} python{python}-venv >/dev/null 2>&1 || true
fi
PYTHON=python3
if command -v python{python} >/dev/null 2>&1; then PYTHON=python{python}; fi
"$PYTHON" -m venv "$ROOT/venv"
# torch's CPU build (Gradescope has no GPU): the default index would pull gigabytes of CUDA libraries.
"$ROOT/venv/bin/pip" install -q --index-url https://download.pytorch.org/whl/cpu "torch=={torch}"
# every other package at the exact version torchgrade was tested with (engine/requirements.lock)
if ! "$ROOT/venv/bin/pip" install -q -c "$SOURCE/engine/requirements.lock" "$SOURCE/engine"; then
  echo "setup.sh: the versions torchgrade was tested with (engine/requirements.lock, on Python {python}) do not" \\
       "install on $("$PYTHON" -V): build autograder.zip with torchgrade on that Python, or choose a" \\
       "Gradescope base image with Python {python}" >&2
  exit 1
fi
{lock_down}
# The sandbox's compiled watch of torch's dispatcher, for this torch (without a C++ compiler, the profiler).
if command -v apt-get >/dev/null 2>&1; then apt-get install -y -qq g++ >/dev/null 2>&1 || true; fi
"$ROOT/venv/bin/torchgrade" observer build || echo "setup.sh: grading will watch with torch's profiler" >&2
# The build's test: the reference must score full marks here, at the isolation level students will get,
# or the image is not built. It records the reference's outcomes, which every submission then reuses.
SMOKE="$(mktemp -d)"
"$ROOT/venv/bin/torchgrade" autograde "$SOURCE/{course}/{reference}" --results "$SMOKE/results.json" --smoke \\
  {autograde_args}
rm -rf "$SMOKE"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: grade $ROOT/submission, write $ROOT/results/results.json.
# Made by `torchgrade gradescope` (torchgrade {version}). Nothing is downloaded here.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
if [ -x "$ROOT/venv/bin/torchgrade" ]; then PATH="$ROOT/venv/bin:$PATH"; fi
export PIP_NO_INDEX=1
{lock_down}cd "$SOURCE/{course}"
exec torchgrade autograde "$ROOT/submission" --results "$ROOT/results/results.json" \\
  {autograde_args}
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
        from torchgrade.base.version import __version__

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
torchgrade = ["templates/*.html", "checks.ini", "sandbox/observer.cpp"]
"""


def lock(root: str = "torchgrade") -> str:
    """requirements.lock: every package torchgrade needs, directly or not, at the version installed here
    (`name==version`, sorted), which setup.sh installs as constraints: the image is what was tested."""
    from packaging.requirements import Requirement

    found: dict[str, str] = {}
    pending = [root]
    while pending:
        name = pending.pop()
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # required only where its marker holds (checked below), or by an extra
        key = distribution.metadata["Name"].lower().replace("_", "-")
        if key in found:
            continue
        found[key] = distribution.version.split("+")[0]  # torch's "+cpu": its index is setup.sh's business
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    found.pop(root, None)  # the engine itself comes from engine/
    head = (f"# The exact versions torchgrade was tested with (Python {sys.version_info[0]}.{sys.version_info[1]}, "
            f"{sys.platform}); made by `torchgrade gradescope`, installed by setup.sh as constraints.\n")
    return head + "".join(f"{name}=={version}\n" for name, version in sorted(found.items()))


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def stage(assignment: Assignment, folder: Path, device: str = "all") -> list[str]:
    """Write the autograder's files into folder (what the zip holds); return their relative paths."""
    from torchgrade.base.version import __version__

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
    (folder / "engine" / "requirements.lock").write_text(lock(), encoding="utf-8")
    values = {"version": __version__, "torch": _torch_version(), "course": COURSE, "device": device,
              "reference": LAYOUT["reference"], "probes": LAYOUT["probes"],
              "python": "{}.{}".format(*sys.version_info[:2]), "outcomes": OUTCOMES}
    values["lock_down"] = LOCK_DOWN.format(**values)
    values["autograde_args"] = AUTOGRADE_ARGS.format(**values)
    (folder / "setup.sh").write_text(SETUP_SH.format(**values), encoding="utf-8")
    (folder / "run_autograder").write_text(RUN_AUTOGRADER.format(**values), encoding="utf-8")
    for script in ("setup.sh", "run_autograder"):
        (folder / script).chmod(0o755)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def build(assignment: Assignment, out: Path, device: str = "all") -> Built:
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
