"""A tiny course for the class-grading tests: the real reference and stubs, three checks of `tensors`.

Batch tests grade many submissions; with the whole assignment they would take minutes. This course
points `reference:` and `stubs:` at the real folders and `checks:` at a folder of its own (a package
with a unique name, so that several such courses can be collected in one process).
"""

from __future__ import annotations

import textwrap
import uuid
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHECKS = '''
import pytest
import torch


@pytest.mark.target("broadcast_shape")
def test_matches_torch_broadcast_shapes(check):
    check((3, 1), (1, 4))


@pytest.mark.target("one_hot")
def test_matches_one_hot_on_a_small_input(check, device):
    check(torch.tensor([0, 2, 1], device=device), 3)


@pytest.mark.target("one_hot")
def test_infers_the_number_of_classes(check, device):
    check(torch.tensor([3, 0], device=device), -1)
'''

ASSIGNMENT = """
title: Tiny course
reference: {reference}
checks: {checks}
stubs: {stubs}
time_limit: 10
exercises:
  tensors:
    title: Tensors
    targets:
      broadcast_shape: 2
      one_hot: 3
"""

#: The points of the tiny course: what the reference scores.
FULL_MARKS = 5.0


def make_course(root: Path) -> Path:
    """Write the tiny course under root; return its assignment file."""
    checks = root / f"tinychecks_{uuid.uuid4().hex[:10]}"
    (checks / "visible").mkdir(parents=True)
    (checks / "visible" / "test_tensors.py").write_text(CHECKS)
    path = root / "assignment.yaml"
    path.write_text(ASSIGNMENT.format(reference=ROOT / "reference", checks=checks, stubs=ROOT / "exercises"))
    return path


def student(folder: Path, kind: str = "reference", extra: str = "") -> Path:
    """A submission folder with tensors.py: the reference's, or the stub's, plus `extra` code at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    source = ROOT / ("reference" if kind == "reference" else "exercises") / "tensors.py"
    text = source.read_text()
    if extra:
        text += "\n\n" + textwrap.dedent(extra)
    (folder / "tensors.py").write_text(text)
    return folder


def zipped(folder: Path, path: Path) -> Path:
    """The submission folder as a zip file."""
    with zipfile.ZipFile(path, "w") as z:
        for f in folder.rglob("*"):
            if f.is_file():
                z.write(f, f.relative_to(folder).as_posix())
    return path


def slow_one_hot(seconds: float) -> str:
    """Code that makes the submission's one_hot correct but slow (to kill a run in the middle)."""
    return f"""
        import time as _time
        _reference_one_hot = one_hot

        def one_hot(*args, **kwargs):
            _time.sleep({seconds})
            return _reference_one_hot(*args, **kwargs)
    """


def copy_class(names_and_kinds: dict[str, str], root: Path) -> Path:
    """A class folder: one submission folder per name, of the given kind."""
    root.mkdir(parents=True, exist_ok=True)
    for name, kind in names_and_kinds.items():
        student(root / name, kind)
    return root

