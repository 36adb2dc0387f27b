"""Finding submissions on disk (folders, .zip files, folders of those) and unpacking zips safely."""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator

#: Limits on what a submitted zip may unpack to (a zip bomb is a submission error, not a crash).
MAX_UNPACKED_BYTES = 50 * 1024**2
MAX_MEMBERS = 2000


class InputError(Exception):
    """A path given on the command line is not something torchgrade can grade."""


class SubmissionUnreadable(Exception):
    """One submission (inside a class folder) cannot be unpacked; it is graded as all errors."""


@dataclass(frozen=True)
class Submission:
    """One student's work: a folder or a .zip, and the name its outputs go under."""

    name: str
    source: Path


def _is_submission_folder(path: Path, exercises: tuple[str, ...]) -> bool:
    return any((path / f"{name}.py").is_file() for name in exercises)


def discover(paths: list[Path], exercises: tuple[str, ...]) -> list[Submission]:
    """Every submission under `paths`; InputError for a path that neither is nor holds one."""
    found: list[Submission] = []
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        if path.is_file():
            if path.suffix.lower() != ".zip":
                raise InputError(f"{path}: not a submission (expected a folder or a .zip file)")
            _check_zip(path)
            found.append(Submission(path.stem, path))
        elif _is_submission_folder(path, exercises):
            found.append(Submission(path.resolve().name, path))
        else:
            children = sorted(p for p in path.iterdir() if not p.name.startswith(".")
                              and (p.is_dir() or p.suffix.lower() == ".zip"))
            if not children:
                names = ", ".join(f"{n}.py" for n in exercises[:3])
                raise InputError(f"{path}: not a submission (no {names}, ...) and holds no submission folders or .zip files")
            found.extend(Submission(p.stem if p.is_file() else p.name, p) for p in children)
    return _unique(found)


_SKIP_PARTS = {"__pycache__", ".git", "__MACOSX"}


def _files(folder: Path) -> list[Path]:
    """The files of a submission folder that count, sorted (bytecode caches and VCS folders don't)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not _SKIP_PARTS.intersection(p.relative_to(folder).parts)
                  and p.suffix != ".pyc")


def content_hash(submission: Submission) -> str:
    """sha256 of what the student handed in: a zip's bytes, or a folder's file names and contents."""
    digest = hashlib.sha256()
    try:
        if submission.source.is_file():
            with open(submission.source, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            return "zip:" + digest.hexdigest()
        for path in _files(submission.source):
            digest.update(path.relative_to(submission.source).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    except OSError as e:  # graded anyway (as errors, if it can't be read then either), never skipped
        return f"unreadable:{e}"
    return "dir:" + digest.hexdigest()


def packed(submission: Submission) -> bytes:
    """The submission as zip bytes, to send to a grader on another machine (unpacked by `unpacked`)."""
    if submission.source.is_file():
        return submission.source.read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for path in _files(submission.source):
            z.write(path, path.relative_to(submission.source).as_posix())
    return buffer.getvalue()


def _unique(submissions: list[Submission]) -> list[Submission]:
    seen: dict[str, int] = {}
    unique = []
    for s in submissions:
        n = seen.get(s.name, 0)
        seen[s.name] = n + 1
        unique.append(s if n == 0 else Submission(f"{s.name}-{n + 1}", s.source))
    return unique


def _check_zip(path: Path) -> None:
    try:
        with zipfile.ZipFile(path) as z:
            z.namelist()
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError(f"{path}: cannot read this zip file ({e})") from None


@contextlib.contextmanager
def unpacked(submission: Submission, exercises: tuple[str, ...]) -> Iterator[Path]:
    """The submission as a folder: the folder itself, or a zip unpacked into a temporary one."""
    if submission.source.is_dir():
        yield submission.source.resolve()
        return
    root = Path(tempfile.mkdtemp(prefix="torchgrade-zip-"))
    try:
        _extract(submission.source, root)
        yield _submission_root(root, exercises)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _extract(path: Path, root: Path) -> None:
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
            if len(members) > MAX_MEMBERS:
                raise SubmissionUnreadable(f"{path.name} holds {len(members)} files (at most {MAX_MEMBERS})")
            if sum(m.file_size for m in members) > MAX_UNPACKED_BYTES:
                raise SubmissionUnreadable(f"{path.name} unpacks to more than {MAX_UNPACKED_BYTES // 1024**2} MB")
            for m in members:
                name = PurePosixPath(m.filename)
                if m.is_dir() or name.is_absolute() or ".." in name.parts or m.external_attr >> 28 == 0o12:
                    continue  # folders are made as needed; absolute paths, '..' and links are never unpacked
                target = root.joinpath(*name.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(m) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise SubmissionUnreadable(f"cannot read {path.name}: {e}") from None


def _submission_root(root: Path, exercises: tuple[str, ...]) -> Path:
    """Where the exercise files are: the zip's top level, or the one folder it wraps them in."""
    for candidate in [root, *sorted(p for p in root.rglob("*") if p.is_dir() and "__MACOSX" not in p.parts)]:
        if _is_submission_folder(candidate, exercises):
            return candidate
    return root
