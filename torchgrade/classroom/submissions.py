"""Finding submissions on disk and staging each as one folder of its own.

Discovery (`survey`) turns the paths given to `torchgrade grade` into submissions, each with a name
that is safe as a folder name under --out and unique in the class (`bob`, `bob.zip` and `bob-2/` become
bob, bob-2 and bob-3: the suffix never takes a name that is already some entry's own). It recognises
the layouts instructors download (see docs/class-grading.md for the table): a folder or a .zip per
student, Canvas's flat files (`name_id_subid_file`), Moodle's per-student folders and files
(`Full Name_12345_assignsubmission_file_`), GitHub Classroom clones (`assignment-username/`).

Staging (`unpacked`) copies what a student handed in into a private folder: links are followed only
where they stay inside the submission (a class entry that is a link is refused), zips are unpacked
with limits (and a zip found inside a submission when no exercise file is in sight), and the
exercise files are located wherever they sit. An exercise file is `<module>.py` or a notebook
`<module>.ipynb` standing for it (torchgrade/engine/notebooks.py converts it once staged). Nothing of it ever
resolves into the course.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterator

from torchgrade.base.printable import shown

#: Limits on what one submission may stage (a zip bomb or a huge repository is that student's problem only).
MAX_UNPACKED_BYTES = 50 * 1024**2
MAX_MEMBERS = 2000
#: How deep zips inside a submission (a zip in a Moodle folder, a zip in a zip) are unpacked.
MAX_NESTED_ZIPS = 2

#: Names torchgrade writes at the top of --out: no student may take one (see `safe_name`).
RESERVED_NAMES = {"index.html", "grades.csv", "junit.xml", "ledger.jsonl", "results.json", "report.html"}

#: Folders that never count: caches, version control, macOS's zip resource forks.
_SKIP_DIRS = {"__pycache__", ".git", "__MACOSX", ".ipynb_checkpoints"}

#: Folder names that hold a repository's work: a PATH whose only work sits there is one submission.
_WORK_FOLDERS = {"exercises"}

#: Compression methods Python's zipfile unpacks, and names for some it does not.
_SUPPORTED = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_METHODS = {9: "Deflate64", 6: "Implode", 93: "Zstandard", 95: "XZ", 97: "WavPack", 98: "PPMd", 99: "AES"}

_CANVAS = re.compile(r"^(?P<name>[^_]+)_(?:late_)?(?P<id>\d+)_(?P<sub>\d+)_(?P<file>.+)$", re.IGNORECASE)
_MOODLE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assign(?:submission|feedback)_(?P<plugin>[a-z]+)_(?P<file>.*)$")


class InputError(Exception):
    """A path given on the command line is not something torchgrade can grade."""


class SubmissionUnreadable(Exception):
    """One submission (inside a class folder) cannot be unpacked; it is graded as all errors."""


@dataclass(frozen=True)
class Submission:
    """One student's work: a folder, a .zip or loose files, and the name its outputs go under."""

    name: str
    source: Path | None
    #: Loose files gathered from an LMS download: (name to stage it under, file).
    files: tuple[tuple[str, Path], ...] = ()
    #: Why it is not graded (a link out of the class): it gets error rows saying so.
    refused: str = ""


@dataclass
class Survey:
    """What discovery found: the submissions, and notes for the instructor (stray files, skipped folders)."""

    submissions: list[Submission] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- names ---

_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]")


def safe_name(raw: str) -> str:
    """A folder name for outputs: no separators or control characters, no leading dot, never empty,
    valid UTF-8 (a file name of other bytes would crash every writer of JSON), NFC (as macOS zips
    spell it otherwise), at most 150 bytes."""
    name = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    name = _UNSAFE.sub("_", unicodedata.normalize("NFC", name)).strip().lstrip(".")
    while len(name.encode("utf-8")) > 150:
        name = name[:-1]
    name = name.rstrip(". ")
    return name or "unnamed"


def _unique(entries: list[tuple[str, Submission]]) -> list[Submission]:
    """Each submission with a name of its own: its safe name, or that name with the first free -N suffix.

    A suffix never takes a name that is some other entry's own, or one of torchgrade's output files,
    and names differing only in case count as equal (case-insensitive file systems)."""
    bases = [safe_name(raw) for raw, _ in entries]
    taken = {b.casefold() for b in bases} | {r.casefold() for r in RESERVED_NAMES}
    used = {r.casefold() for r in RESERVED_NAMES}
    unique = []
    for base, (_, s) in zip(bases, entries):
        name, n = base, 1
        while name.casefold() in used or (n > 1 and name.casefold() in taken):
            n += 1
            name = f"{base}-{n}"
        used.add(name.casefold())
        unique.append(Submission(name, s.source, s.files, s.refused))
    return unique


# --- discovery ---

def discover(paths: list[Path], exercises: tuple[str, ...], out: Path | None = None) -> list[Submission]:
    """Every submission under `paths`; InputError for a path that neither is nor holds one."""
    return survey(paths, exercises, out).submissions


def survey(paths: list[Path], exercises: tuple[str, ...], out: Path | None = None) -> Survey:
    """Every submission under `paths`, with notes on what was skipped; InputError for a path that holds none."""
    result = Survey()
    entries: list[tuple[str, Submission]] = []
    out_real = os.path.realpath(out) if out is not None else None
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise InputError(f"{path}: no such file or folder")
        if not path.exists():
            raise InputError(f"{path}: a link to nothing")
        try:
            entries.extend(_path_entries(path, exercises, out_real, result.notes))
        except OSError as e:
            raise InputError(f"{path}: cannot be read ({e.strerror or e})") from None
    result.submissions = _unique(entries)
    return result


def _path_entries(path: Path, exercises: tuple[str, ...], out_real: str | None,
                  notes: list[str]) -> list[tuple[str, Submission]]:
    """The submissions one PATH holds, with their raw names."""
    if path.is_file():
        if path.suffix.lower() != ".zip":
            raise InputError(f"{path}: not a submission (expected a folder or a .zip file)")
        _check_zip(path)
        return [(path.name[:-4], Submission("", path))]
    if _is_one_submission(path, exercises):
        return [(Path(os.path.realpath(path)).name, Submission("", path))]  # `.` too
    found = _class_entries(path, exercises, out_real, notes)
    if not found:
        names = ", ".join(f"{n}.py" for n in exercises[:3])  # (or the same names as .ipynb notebooks)
        raise InputError(f"{path}: not a submission (no {names}, ...) and holds no submission folders or .zip files")
    return found


def _exercise_files(folder: Path, exercises: tuple[str, ...]) -> list[str]:
    """The exercise files at the top of folder: `<module>.py`, or a notebook `<module>.ipynb` standing for it."""
    return [name for n in exercises for name in (f"{n}.py", f"{n}.ipynb")
            if (folder / name).is_file() and not (folder / name).is_symlink()
            and not (name.endswith(".ipynb") and (folder / f"{n}.py").is_file())]


def _holds_work(folder: Path, exercises: tuple[str, ...], depth: int = 4) -> bool:
    """Whether an exercise file or a zip sits somewhere under folder (links not followed)."""
    wanted = {f"{n}{suffix}" for n in exercises for suffix in (".py", ".ipynb")}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    for e in entries:
        if e.is_symlink() or e.name.startswith(".") or e.name in _SKIP_DIRS:
            continue
        if e.is_file() and (e.name in wanted or e.name.lower().endswith(".zip")):
            return True
        if e.is_dir() and depth > 0 and _holds_work(Path(e.path), exercises, depth - 1):
            return True
    return False


def _kids(folder: Path, exercises: tuple[str, ...]) -> list[Path]:
    """The entries of folder that look like a student's work."""
    kids = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or p.name in _SKIP_DIRS or p.is_symlink():
            continue
        if p.is_dir() and _holds_work(p, exercises):
            kids.append(p)
        elif p.is_file() and (p.suffix.lower() == ".zip" or _CANVAS.match(p.name) or _MOODLE.match(p.name)):
            kids.append(p)
    return kids


def _is_one_submission(folder: Path, exercises: tuple[str, ...]) -> bool:
    """A folder given as PATH is one submission (not a class): a repository, or exercise files at its top
    (unless more entries beside them hold work than there are such files, two at least: then they are
    stray files at the top of a class), or its only work in an exercises/ folder."""
    if (folder / ".git").exists():
        return True
    kids = _kids(folder, exercises)
    top = _exercise_files(folder, exercises)
    if top:
        return len(kids) < 2 or len(kids) <= len(top)
    return len(kids) == 1 and kids[0].is_dir() and kids[0].name in _WORK_FOLDERS


def _class_entries(folder: Path, exercises: tuple[str, ...], out_real: str | None,
                   notes: list[str]) -> list[tuple[str, Submission]]:
    """The submissions in a class folder, each with its raw name, in a stable order."""
    entries: list[tuple[str, Submission]] = []
    loose: dict[str, list[tuple[str, Path]]] = {}  # an LMS student's loose files, by student
    repos: list[Path] = []
    stray = []
    for p in sorted(folder.iterdir(), key=lambda p: p.name):
        hidden = p.name.startswith(".") and not (p.name.lower().endswith(".zip") and p.is_file())
        if hidden or p.name in _SKIP_DIRS:  # .DS_Store, .git; but a zip called ...zip is a student's
            continue
        real = os.path.realpath(p)
        if real == out_real:  # one that only holds --out is graded, without it (see _collect)
            notes.append(f"{shown(p)}: skipped, it is the output folder --out")
            continue
        if p.is_symlink():
            entries.append((_student_name(p.name), Submission("", p, refused=(
                f"{p.name} is a link, and links are not followed out of a submission: hand in the files themselves"))))
            continue
        if p.is_dir():
            if _is_output(str(p)):
                notes.append(f"{shown(p)}: skipped, it is an output folder of torchgrade "
                             f"(it holds ledger.jsonl or .torchgrade.lock)")
                continue
            moodle = _MOODLE.match(p.name)
            if moodle:
                if moodle["plugin"] == "file":
                    entries.append((f"{moodle['name']}_{moodle['id']}", Submission("", p)))
                continue  # online text and feedback folders hold no code
            if (p / ".git").exists():
                repos.append(p)
            else:
                entries.append((p.name, Submission("", p)))
        elif p.is_file():
            canvas, moodle = _CANVAS.match(p.name), _MOODLE.match(p.name)
            if moodle and moodle["plugin"] == "file":
                loose.setdefault(f"{moodle['name']}_{moodle['id']}", []).append((moodle["file"], p))
            elif moodle:
                continue
            elif canvas:
                loose.setdefault(f"{canvas['name']}_{canvas['id']}", []).append(
                    (_canvas_file_name(canvas["file"], exercises), p))
            elif p.suffix.lower() == ".zip":
                entries.append((p.name[:-4], Submission("", p)))
            else:
                stray.append(p.name)
        else:
            stray.append(p.name)
    if stray:
        notes.append(f"{shown(folder)}: not submissions, ignored (a class folder holds a folder or a .zip per student): "
                     + ", ".join(map(shown, stray)))
    prefix = _classroom_prefix([r.name for r in repos])
    entries.extend((r.name[len(prefix):], Submission("", r)) for r in repos)
    for student, files in loose.items():
        if len(files) == 1 and files[0][1].suffix.lower() == ".zip":
            entries.append((student, Submission("", files[0][1])))
        else:
            entries.append((student, Submission("", None, files=tuple(sorted(files)))))
    return sorted(entries, key=lambda e: (e[0], str(e[1].source), e[1].files))


def _student_name(entry: str) -> str:
    match = _MOODLE.match(entry)
    if match:
        return f"{match['name']}_{match['id']}"
    return entry[:-4] if entry.lower().endswith(".zip") else entry


def _canvas_file_name(name: str, exercises: tuple[str, ...]) -> str:
    """Canvas renames a resubmitted file tensors-1.py (tensors-1.ipynb): the exercise's own name again."""
    match = re.fullmatch(r"(.+)-\d+(\.py|\.ipynb)", name)
    if match and match[1] in exercises:
        return match[1] + match[2]
    return name


def _classroom_prefix(names: list[str]) -> str:
    """GitHub Classroom's `assignment-` prefix shared by every clone (two clones at least), or ''."""
    if len(names) < 2:
        return ""
    common = os.path.commonprefix(names)
    prefix = common[:common.rfind("-") + 1]
    return prefix if all(len(n) > len(prefix) for n in names) else ""


def _check_zip(path: Path) -> None:
    try:
        with zipfile.ZipFile(path) as z:
            z.namelist()
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError(f"{path}: cannot read this zip file ({e})") from None


# --- what a submission holds ---

def _collect(root: Path, notes: list[str]) -> list[tuple[str, Path]]:
    """The files of a folder that count, as (relative name, real path), sorted.

    A link is followed only when what it points to is inside `root`; one leading out is left out,
    with a note. Caches, version control folders and hidden folders never count."""
    real_root = os.path.realpath(root)
    files: list[tuple[str, Path]] = []

    def inside(path: str) -> bool:
        return path == real_root or path.startswith(real_root + os.sep)

    def walk(folder: str, rel: str, seen: frozenset) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            name = f"{rel}{e.name}"
            if e.name in _SKIP_DIRS or e.name.endswith(".pyc"):
                continue
            path = e.path
            if e.is_symlink():
                target = os.path.realpath(path)
                if not inside(target) or not os.path.exists(target):
                    notes.append(f"{shown(name)} is a link that leads out of the submission: not graded "
                                 f"(hand in the file itself)")
                    continue
                path = target
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode) and not e.name.startswith("."):
                real = os.path.realpath(path)
                # torchgrade's own output (--out inside the submission) is no work; a link to a folder
                # above it would loop
                if not _is_output(path) and real not in seen:
                    walk(path, f"{name}/", seen | {real})
            elif stat.S_ISREG(info.st_mode):
                files.append((name, Path(path)))

    walk(real_root, "", frozenset({real_root}))
    return files


def _is_output(folder: str) -> bool:
    """Whether a folder is an output folder of torchgrade: its lock file (there from the start of a run)
    or its ledger. (A student who hands in such a folder only hides it from themselves.)"""
    return any(os.path.isfile(os.path.join(folder, n)) for n in (".torchgrade.lock", "ledger.jsonl"))


def _members(submission: Submission, notes: list[str]) -> list[tuple[str, Path]]:
    """A folder's or loose files' members as (name, file); a zip has none (it is its own bytes)."""
    if submission.files:
        return list(submission.files)
    if submission.source is not None and submission.source.is_dir():
        return _collect(submission.source, notes)
    return []


def content_hash(submission: Submission) -> str:
    """sha256 of what the student handed in: a zip's bytes, or a folder's file names and contents."""
    digest = hashlib.sha256()
    if submission.refused:  # a link: what it says it points to (never what is there)
        with contextlib.suppress(OSError, TypeError):
            digest.update(os.fsencode(os.readlink(submission.source)))
        return "refused:" + digest.hexdigest()
    notes: list[str] = []
    try:
        if not submission.files and submission.source is not None and submission.source.is_file():
            with open(submission.source, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            return "zip:" + digest.hexdigest()
        for name, path in _members(submission, notes):
            digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
            digest.update(_file_digest(path))
        for note in notes:  # a link that leads out still changes the hash when it changes
            digest.update(note.encode("utf-8", "surrogateescape") + b"\0")
    except OSError as e:  # graded anyway (as errors, if it can't be read then either), never skipped
        return f"unreadable:{e}"
    return "dir:" + digest.hexdigest()


def _file_digest(path: Path) -> bytes:
    """A member's digest, read in blocks; past what staging copies (inbox.MAX_STAGED_BYTES, never graded) its
    size and first block stand for it: the trusted side's time on a student's file is bounded."""
    from torchgrade.sandbox.inbox import MAX_STAGED_BYTES

    file_hash = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_STAGED_BYTES:
            file_hash.update(f"{size}\0".encode())
            file_hash.update(f.read(1 << 20))
            return file_hash.digest()
        for block in iter(lambda: f.read(1 << 20), b""):
            file_hash.update(block)
    return file_hash.digest()


def _utf8_name(name: str) -> str:
    """A member's name as it is staged (and packed: a zip holds UTF-8 names only): bytes that are not
    UTF-8 become U+FFFD, so that no such name reaches the sandbox or anything written."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def packed(submission: Submission) -> bytes:
    """The submission as zip bytes, to send to a grader on another machine (unpacked by `unpacked`)."""
    if not submission.files and submission.source is not None and submission.source.is_file():
        return submission.source.read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, path in _members(submission, []):
            z.write(path, _utf8_name(name))
    return buffer.getvalue()


# --- staging ---

@dataclass
class Staged:
    """A submission staged in a private folder: where its exercise files are, and notes for the student."""

    folder: Path
    notes: list[str] = field(default_factory=list)


class _Budget:
    """What one submission may still stage, over all its files and nested zips."""

    def __init__(self) -> None:
        self.members = MAX_MEMBERS
        self.bytes = MAX_UNPACKED_BYTES

    def take(self, size: int) -> bool:
        if self.members <= 0 or size > self.bytes:
            return False
        self.members -= 1
        self.bytes -= size
        return True


@contextlib.contextmanager
def unpacked(submission: Submission, exercises: tuple[str, ...]) -> Iterator[Path]:
    """The submission as a private folder holding its exercise files (see `staged`)."""
    with staged(submission, exercises) as s:
        yield s.folder


@contextlib.contextmanager
def staged(submission: Submission, exercises: tuple[str, ...]) -> Iterator[Staged]:
    """The submission copied into a temporary folder, its exercise files located wherever they sit.

    SubmissionUnreadable when it cannot be staged (a refused link, a zip that cannot be read)."""
    if submission.refused:
        raise SubmissionUnreadable(submission.refused)
    root = Path(tempfile.mkdtemp(prefix="torchgrade-submission-"))
    try:
        notes: list[str] = []
        budget = _Budget()
        if not submission.files and submission.source is not None and submission.source.is_file():
            _extract(submission.source, root, budget, notes, submission.source.name)
        else:
            skipped = 0
            members = _members(submission, notes)
            for name, path in sorted(members, key=lambda m: (not m[0].endswith((".py", ".ipynb")), m[0])):
                try:
                    size = path.stat().st_size
                except OSError:
                    continue
                if not budget.take(size):
                    skipped += 1
                    continue
                target = root.joinpath(*PurePosixPath(_utf8_name(name)).parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
            if skipped:
                notes.append(f"{skipped} file(s) not staged: a submission may hold at most {MAX_MEMBERS} files "
                             f"and {MAX_UNPACKED_BYTES // 1024**2} MB")
        for _ in range(MAX_NESTED_ZIPS):
            if _candidates(root, exercises):
                break
            inner = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() == ".zip"
                           and "__MACOSX" not in p.parts)
            if not inner:
                break
            for z in inner:
                into = z.with_name(z.name[:-4] + ".unzipped")
                _extract(z, into, budget, notes, z.relative_to(root).as_posix())
                z.unlink()
        folder = _choose(root, exercises, notes)
        yield Staged(folder, notes)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _extract(path: Path, root: Path, budget: _Budget, notes: list[str], label: str) -> None:
    """Unpack a zip into root: never outside it, no links, within the budget; SubmissionUnreadable
    with what the student can do about it when it cannot be read."""
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
            for m in members:
                if m.flag_bits & 0x1:
                    raise SubmissionUnreadable(f"{label} is password-protected (encrypted): hand in a zip "
                                               f"without a password")
                if m.compress_type not in _SUPPORTED:
                    method = _METHODS.get(m.compress_type, f"method {m.compress_type}")
                    raise SubmissionUnreadable(
                        f"{label} is compressed with {method}, which torchgrade cannot unpack: zip the files "
                        f"again with the standard method (Deflate), e.g. `zip -r` or your system's Compress")
            if len(members) > budget.members:
                raise SubmissionUnreadable(f"{label} holds {len(members)} files (at most {MAX_MEMBERS})")
            if sum(m.file_size for m in members) > budget.bytes:
                raise SubmissionUnreadable(f"{label} unpacks to more than {MAX_UNPACKED_BYTES // 1024**2} MB")
            links = 0
            for m in members:
                # Windows tools write backslashes; a drive letter, '..' or an absolute path is never followed.
                parts = [p for p in m.filename.replace("\\", "/").split("/") if p not in ("", ".")]
                if m.is_dir() or m.filename.endswith("\\") or not parts:
                    continue
                if ".." in parts or parts[0].endswith(":") or m.filename.startswith(("/", "\\")):
                    notes.append(f"{shown(label)}: {shown(m.filename)} points outside the zip: not unpacked")
                    continue
                if m.external_attr >> 28 == 0o12:
                    links += 1
                    continue
                if "__MACOSX" in parts:
                    continue
                budget.take(m.file_size)
                target = root.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(m) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            if links:
                notes.append(f"{shown(label)}: {links} link(s) inside the zip, not unpacked (hand in the files themselves)")
    except SubmissionUnreadable:
        raise
    except (zipfile.BadZipFile, EOFError, zlib.error, ValueError) as e:
        raise SubmissionUnreadable(f"cannot read {label}: the zip is damaged or incomplete ({e}); make it again "
                                   f"and hand it in again") from None
    except NotImplementedError as e:
        raise SubmissionUnreadable(f"{label} cannot be unpacked ({e}): zip the files again with the standard "
                                   f"method (Deflate)") from None
    except RuntimeError as e:  # zipfile's word for an encrypted member
        raise SubmissionUnreadable(f"{label} cannot be unpacked ({e}): hand in a zip without a password") from None
    except OSError as e:
        raise SubmissionUnreadable(f"cannot read {label}: {e}") from None


def _candidates(root: Path, exercises: tuple[str, ...]) -> list[tuple[Path, list[str]]]:
    """Every folder under root holding exercise files, with those files."""
    found = []
    for folder, dirs, _ in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        files = _exercise_files(Path(folder), exercises)
        if files:
            found.append((Path(folder), files))
    return found


def _choose(root: Path, exercises: tuple[str, ...], notes: list[str]) -> Path:
    """The folder to grade: the one holding the most exercise files (then the shallowest, then the last
    by name: attempt2/ over attempt1/); a note names the others."""
    candidates = _candidates(root, exercises)
    if not candidates:
        return root
    ranked = sorted(candidates, key=lambda c: (-len(c[1]), len(c[0].relative_to(root).parts),
                                               [_reverse(p) for p in c[0].relative_to(root).parts]))
    chosen = ranked[0][0]
    if len(candidates) > 1:
        def label(folder: Path) -> str:
            rel = folder.relative_to(root).as_posix()
            return "the top folder" if rel == "." else f"{shown(rel.replace('.unzipped', '.zip'))}/"

        listed = "; ".join(f"{label(f)} ({', '.join(files)})" for f, files in candidates)
        notes.append(f"{len(candidates)} sets of exercise files were handed in: {listed}. Graded {label(chosen)} "
                     f"(the one with the most exercise files, then the least deep, then the last by name); "
                     f"to have another graded, hand in only that one")
    return chosen


def _reverse(text: str) -> list[int]:
    """A sort key that orders strings from the last to the first."""
    return [-ord(c) for c in text] + [1]
