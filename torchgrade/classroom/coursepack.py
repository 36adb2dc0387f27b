"""The course as content-addressed bytes, for graders on machines that do not have its files.

A Dask worker on another machine has torchgrade and nothing of the course. `pack` lays out what
grading reads (the assignment file, the reference, the checks, the course's probes and hints) in
the layout `torchgrade gradescope` uses, as one zip whose SHA-256 names it. `materialise` unpacks
it once per machine, into a folder named after that digest, and checks the digest first: bytes
that do not hash to their name are refused, never graded with. The packing is deterministic (sorted
names, fixed timestamps), so the same course always has the same name and a worker that already
holds it unpacks nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from torchgrade.engine.config import ASSIGNMENT_FILE, Assignment
# where each part of the course lies, as in the Gradescope autograder (the assignment file is rewritten to match)
from torchgrade.outputs.gradescope import LAYOUT

_SKIP = {"__pycache__", ".pytest_cache", ".git"}
_EPOCH = (1980, 1, 1, 0, 0, 0)


class CoursePackError(Exception):
    """A pack that is damaged or does not match its name."""


@dataclass(frozen=True)
class CoursePack:
    """A course as zip bytes, named by their SHA-256."""

    digest: str
    data: bytes


def _layout(assignment: Assignment) -> dict[str, str]:
    # The checks keep their folder's name: pytest names check modules after it, and a worker process
    # may hold the checks of several courses.
    return {**LAYOUT, "checks": f"graders/{assignment.checks_dir.name}"}


def _files(assignment: Assignment, layout: dict[str, str]) -> list[tuple[str, Path]]:
    parts = {"reference": assignment.reference_dir, "checks": assignment.checks_dir,
             "probes": assignment.probes_dir, "hints": assignment.hints_file}
    files = []
    for key, source in parts.items():
        if source.is_file():
            files.append((layout[key], source))
        elif source.is_dir():
            files += [(f"{layout[key]}/{p.relative_to(source).as_posix()}", p) for p in source.rglob("*")
                      if p.is_file() and not _SKIP.intersection(p.relative_to(source).parts)]
    return sorted(files)


def pack(assignment: Assignment) -> CoursePack:
    """What grading `assignment` reads, as one deterministic zip."""
    layout = _layout(assignment)
    data = yaml.safe_load(assignment.path.read_text(encoding="utf-8")) or {}
    data.update({k: layout[k] for k in ("reference", "checks", "probes", "hints")})  # where the pack has them
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        members = [(ASSIGNMENT_FILE, yaml.safe_dump(data, allow_unicode=True, sort_keys=True).encode())]
        members += [(name, path.read_bytes()) for name, path in _files(assignment, layout)]
        for name, content in members:
            info = zipfile.ZipInfo(name, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, content)
    blob = buffer.getvalue()
    return CoursePack(hashlib.sha256(blob).hexdigest(), blob)


def cache_root() -> Path:
    """Where a machine keeps the courses it was sent (TORCHGRADE_COURSE_CACHE, else the temp folder)."""
    return Path(os.environ.get("TORCHGRADE_COURSE_CACHE") or tempfile.gettempdir())


def materialise(course: CoursePack, root: Path | None = None) -> Path:
    """The course's assignment file on this machine: unpacked from `course` unless already there.

    Safe for several processes at once: each unpacks into a private folder and renames it into place;
    the first rename wins and the others remove theirs."""
    if hashlib.sha256(course.data).hexdigest() != course.digest:
        raise CoursePackError(f"the course sent to this worker does not match its digest {course.digest[:12]}")
    root = root or cache_root()
    final = root / f"torchgrade-course-{course.digest}"
    if not (final / ASSIGNMENT_FILE).is_file():
        root.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".torchgrade-course-{course.digest[:12]}-", dir=root))
        try:
            with zipfile.ZipFile(io.BytesIO(course.data)) as z:
                for info in z.infolist():
                    name = Path(info.filename)
                    # the pack is ours, but a worker still writes nothing outside its folder
                    if name.is_absolute() or ".." in name.parts:
                        raise CoursePackError(f"the course sent to this worker holds {info.filename!r}")
                    target = partial / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(z.read(info))
            with contextlib.suppress(OSError):  # another process put the same course in place first
                os.rename(partial, final)
        except zipfile.BadZipFile as e:
            raise CoursePackError(f"the course sent to this worker is not a zip: {e}") from None
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return final / ASSIGNMENT_FILE
