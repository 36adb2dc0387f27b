"""A corpus of class folders as instructors get them, and of damaged archives, built on demand.

Each builder in `LAYOUTS` makes one class folder under a root and returns what grading it must
give: {student name: score} with the tiny course (tests/tiny_course.py: the reference scores
FULL_MARKS, the stub 0), and words that must appear in the notes of discovery (`notes`) or in a
student's grade (`outputs`). `ARCHIVES` makes zips that cannot be unpacked, each with the words its
error rows must hold.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tiny_course import FULL_MARKS, ROOT, student, zipped

REFERENCE = (ROOT / "reference" / "tensors.py").read_text()
STUB = (ROOT / "exercises" / "tensors.py").read_text()


@dataclass
class Expected:
    """What grading a corpus class must give."""

    scores: dict[str, float]
    notes: list[str] = field(default_factory=list)
    #: Words that must appear in a student's grade output (results.json "output").
    outputs: dict[str, list[str]] = field(default_factory=dict)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def zip_of(path: Path, members: dict[str, str | bytes]) -> Path:
    """A zip of the given members (names are written as given: backslashes, folders, nested zips)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data)
    return path


def zip_bytes(members: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buffer.getvalue()


def zip_with_link(path: Path, name: str, target: str) -> Path:
    """A zip whose member `name` is a symlink to `target` (as Info-ZIP's `zip -y` stores one)."""
    with zipfile.ZipFile(path, "w") as z:
        info = zipfile.ZipInfo(name)
        info.external_attr = (0o120777 << 16)
        z.writestr(info, target)
    return path


# --- layouts ---

def plain(root: Path) -> Expected:
    student(root / "alice", "reference")
    zipped(student(root.parent / "src-bob", "stub"), root / "bob.zip")
    zip_of(root / "carol.zip", {"carol/tensors.py": REFERENCE})  # the files wrapped in one folder
    return Expected({"alice": FULL_MARKS, "bob": 0.0, "carol": FULL_MARKS})


def nested_folders(root: Path) -> Expected:
    write(root / "alice" / "exercises" / "tensors.py", REFERENCE)
    write(root / "bob" / "hw1" / "solutions" / "tensors.py", REFERENCE)
    write(root / "carol" / "README.md", "I ran out of time")
    return Expected({"alice": FULL_MARKS, "bob": FULL_MARKS, "carol": 0.0})


def github_classroom(root: Path) -> Expected:
    for name, where, text in (("alice", "exercises/tensors.py", REFERENCE), ("bob", "tensors.py", STUB),
                              ("mary-jane", "exercises/tensors.py", REFERENCE)):
        repo = root / f"pytorch-basics-{name}"
        write(repo / ".git" / "HEAD", "ref: refs/heads/main\n")
        write(repo / ".git" / "objects" / "tensors.py", STUB)  # never taken for the student's work
        write(repo / "README.md", "# PyTorch basics\n")
        write(repo / where, text)
    return Expected({"alice": FULL_MARKS, "bob": 0.0, "mary-jane": FULL_MARKS})


def moodle_folders(root: Path) -> Expected:
    write(root / "Alice Smith_101_assignsubmission_file_" / "tensors.py", REFERENCE)
    zip_of(root / "Bob Jones_102_assignsubmission_file_" / "work.zip", {"work/tensors.py": REFERENCE})
    write(root / "Bob Jones_102_assignsubmission_onlinetext_" / "onlinetext.html", "<p>done</p>")
    write(root / "Carol Lee_103_assignsubmission_file_" / "tensors.py", STUB)
    return Expected({"Alice Smith_101": FULL_MARKS, "Bob Jones_102": FULL_MARKS, "Carol Lee_103": 0.0})


def moodle_flat(root: Path) -> Expected:
    write(root / "Alice Smith_101_assignsubmission_file_tensors.py", REFERENCE)
    write(root / "Bob Jones_102_assignsubmission_file_tensors.py", STUB)
    write(root / "Bob Jones_102_assignsubmission_onlinetext_onlinetext.html", "<p>hi</p>")
    return Expected({"Alice Smith_101": FULL_MARKS, "Bob Jones_102": 0.0})


def canvas(root: Path) -> Expected:
    write(root / "smithalice_201_9001_tensors.py", REFERENCE)
    write(root / "jonesbob_late_202_9002_tensors-1.py", REFERENCE)  # a resubmission, late
    zip_of(root / "leecarol_203_9003_homework.zip", {"homework/tensors.py": REFERENCE})
    write(root / "kimdan_204_9004_tensors.py", STUB)
    write(root / "kimdan_204_9005_notes.txt", "a second file of the same student")
    write(root / "grades-export.txt", "not a submission")
    return Expected({"smithalice_201": FULL_MARKS, "jonesbob_202": FULL_MARKS, "leecarol_203": FULL_MARKS,
                     "kimdan_204": 0.0}, notes=["grades-export.txt"])


def zips_inside(root: Path) -> Expected:
    zip_of(root / "alice.zip", {"inner.zip": zip_bytes({"tensors.py": REFERENCE})})  # a zip in a zip
    zip_of(root / "bob" / "submission.zip", {"tensors.py": REFERENCE})  # a zip in a student's folder
    zip_of(root / "carol.zip", {"carol\\tensors.py": REFERENCE})  # made on Windows: backslashes
    zip_of(root / "dan.zip", {"__MACOSX/._tensors.py": b"\x00\x05\x16\x07", "dan/tensors.py": REFERENCE})
    return Expected({"alice": FULL_MARKS, "bob": FULL_MARKS, "carol": FULL_MARKS, "dan": FULL_MARKS})


def two_sets(root: Path) -> Expected:
    zip_of(root / "alice.zip", {"attempt1/tensors.py": STUB, "attempt2/tensors.py": REFERENCE})
    write(root / "bob" / "old" / "tensors.py", REFERENCE)
    write(root / "bob" / "new" / "tensors.py", STUB)
    return Expected({"alice": FULL_MARKS, "bob": FULL_MARKS},
                    outputs={"alice": ["attempt1/", "attempt2/", "Graded attempt2/"],
                             "bob": ["new/", "old/", "Graded old/"]})


def stray_files(root: Path) -> Expected:
    student(root / "alice", "reference")
    student(root / "bob", "stub")
    write(root / "tensors.py", REFERENCE)  # the instructor's own copy, left at the top
    write(root / "notes.txt", "grading notes")
    return Expected({"alice": FULL_MARKS, "bob": 0.0}, notes=["tensors.py", "notes.txt"])


def colliding_names(root: Path) -> Expected:
    student(root / "bob", "reference")
    zipped(student(root.parent / "src-bob", "stub"), root / "bob.zip")
    student(root / "bob-2", "reference")
    student(root / "Bob", "stub")  # the same name on a case-insensitive file system
    return Expected({"Bob": 0.0, "bob-3": FULL_MARKS, "bob-4": 0.0, "bob-2": FULL_MARKS})


def own_file_names(root: Path) -> Expected:
    source = student(root.parent / "src-ref", "reference")
    for name in ("ledger.jsonl.zip", "grades.csv.zip", "index.html.zip", "...zip", "a#1.zip"):
        zipped(source, root / name)
    student(root / "junit.xml", "reference")
    student(root / "50%off", "stub")
    student(root / ".hidden", "reference")  # a folder starting with '.' is hidden: skipped
    student(Path(os.fsdecode(os.fsencode(root) + b"/caf\xe9")), "stub")  # a name that is not UTF-8
    return Expected({"ledger.jsonl-2": FULL_MARKS, "grades.csv-2": FULL_MARKS, "index.html-2": FULL_MARKS,
                     "unnamed": FULL_MARKS, "a#1": FULL_MARKS, "junit.xml-2": FULL_MARKS, "50%off": 0.0,
                     "caf\ufffd": 0.0})


def any_bytes_in_names(root: Path) -> Expected:
    """Names of any bytes, inside submissions and as submissions: not UTF-8, control characters, the
    longest a file system takes. (Once a note naming one stopped every writer, and the run, for good.)"""
    top = os.fsencode(root)
    for name, where in (("alice", b"notes-\xff\xfe.txt"), ("bob", b"\x1b[31mred\x07\n.txt"),
                        ("carol", b"L" * 250 + b".txt")):
        student(root / name, "reference")
        write(Path(os.fsdecode(os.fsencode(root / name) + b"/" + where)), "x")
    for attempt in (b"try\xe91", b"try\xe92\x1b"):  # two sets, a note names both folders
        write(Path(os.fsdecode(top + b"/dan/" + attempt + b"/tensors.py")), REFERENCE)
    # messages and output of the student's that hold such a name (as os.fsdecode gives it: lone surrogates)
    erin = student(root / "erin", "reference")
    (erin / "tensors.py").write_text(REFERENCE + "\n\ndef one_hot(*args, **kwargs):\n    import os, sys\n"
                                     "    print(os.fsdecode(b'pr\\xe9nt\\x1b'), file=sys.stderr)\n"
                                     "    raise ValueError(os.fsdecode(b'\\xe9t\\xe9.txt'))\n")
    for folder in (b"fr\xe9d\x07\n", b"Z" * 255, b"g\xc3\x28" + b"\xe2\x80\xae" + b"gnirts"):
        student(Path(os.fsdecode(top + b"/" + folder)), "reference")
    return Expected({"alice": FULL_MARKS, "bob": FULL_MARKS, "carol": FULL_MARKS, "dan": FULL_MARKS, "erin": 2.0,
                     "fr\ufffdd__": FULL_MARKS, "Z" * 150: FULL_MARKS, "g\ufffd(\u202egnirts": FULL_MARKS},
                    outputs={"dan": ["try\ufffd1/", "Graded try\ufffd2\\x1b/"], "erin": ["ValueError: \ufffdt\ufffd.txt"]})


def links(root: Path) -> Expected:
    (root).mkdir(parents=True, exist_ok=True)
    os.symlink(ROOT / "reference", root / "mallory")  # a class entry that is a link to the reference
    repo = root / "eve"  # a repository whose exercises/ is such a link
    write(repo / ".git" / "HEAD", "ref: refs/heads/main\n")
    os.symlink(ROOT / "reference", repo / "exercises")
    frank = root / "frank"
    frank.mkdir()
    os.symlink(ROOT / "reference" / "tensors.py", frank / "tensors.py")  # one file linked out
    gina = root / "gina"  # links that stay inside the submission are staged as what they point to
    write(gina / "src" / "tensors.py", REFERENCE)
    os.symlink("src", gina / "exercises")
    hank = student(root / "hank", "reference")
    os.symlink(".", hank / "loop")  # a link to itself: no endless walk
    os.symlink("../../../..", hank / "up")  # and one far up: not followed
    zip_with_link(root / "ivan.zip", "tensors.py", str(ROOT / "reference" / "tensors.py"))
    return Expected({"mallory": 0.0, "eve": 0.0, "frank": 0.0, "gina": FULL_MARKS, "hank": FULL_MARKS,
                     "ivan": 0.0},
                    outputs={"mallory": ["link"], "eve": ["exercises is a link that leads out"],
                             "frank": ["tensors.py is a link that leads out"], "hank": ["up is a link"],
                             "ivan": ["link(s) inside the zip"]})


def notebook_of(*cells: str | tuple[str, list[str]], **metadata) -> str:
    """A notebook (nbformat 4, as Jupyter saves it) of code cells: a cell is its source, or (source, tags)."""
    import nbformat
    from nbformat import v4

    made = []
    for cell in cells:
        source, tags = cell if isinstance(cell, tuple) else (cell, [])
        made.append(v4.new_code_cell(source, metadata={"tags": tags} if tags else {}))
    node = v4.new_notebook(cells=[v4.new_markdown_cell("# Homework 1"), *made], metadata=metadata or {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    return nbformat.writes(node)


#: A student's notebook as Jupyter leaves it: magics, shell lines, help, a timing, a training loop tagged
#: out of grading, outputs; its code is the reference's.
def solved_notebook(extra: str = "") -> str:
    cells = ["%matplotlib inline\n!pip install -q torch\nimport torch\ntorch.cat?", REFERENCE,
             "%%time\nbroadcast_shape((3, 1), (1, 4))", ("while True:  # training\n    pass", ["skip-grading"]),
             "# skip-grading\nwhile True:\n    pass"]
    return notebook_of(*cells, *([extra] if extra else []))


def notebooks(root: Path) -> Expected:
    import json

    write(root / "alice" / "tensors.ipynb", solved_notebook())
    zip_of(root / "bob.zip", {"hw/tensors.ipynb": notebook_of(STUB)})
    write(root / "smithcarol_301_9101_tensors-1.ipynb", solved_notebook())  # Canvas: resubmitted, renamed
    write(root / "erin" / "tensors.py", STUB)  # both: the .py is graded, a note says so
    write(root / "erin" / "tensors.ipynb", solved_notebook())
    write(root / "frank" / "tensors.ipynb", "print('hello')\n")
    write(root / "gina" / "tensors.ipynb", notebook_of(REFERENCE, kernelspec={"name": "ir", "display_name": "R",
                                                                              "language": "R"}))
    write(root / "hal" / "tensors.ipynb", notebook_of("", "   "))
    write(root / "ivy" / "tensors.ipynb", json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                                                      "worksheets": [{"cells": []}]}))
    big = json.loads(solved_notebook())  # megabytes of outputs: ignored
    big["cells"][2]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * (3 * 1024**2)}]
    write(root / "jack" / "tensors.ipynb", json.dumps(big))
    write(root / "kate" / "tensors.ipynb", solved_notebook("import torch\ndef broadcast_shape(*shapes):\n"
                                                           "    raise ValueError('not yet')\n"))
    return Expected({"alice": FULL_MARKS, "bob": 0.0, "smithcarol_301": FULL_MARKS, "erin": 0.0, "frank": 0.0,
                     "gina": 0.0, "hal": 0.0, "ivy": 0.0, "jack": FULL_MARKS, "kate": FULL_MARKS - 2},
                    outputs={"erin": ["tensors.py and tensors.ipynb were both handed in: tensors.py is graded"],
                             "frank": ["tensors.ipynb is not a notebook (its content is not JSON)"],
                             "gina": ["notebook for R", "Python 3 kernel"], "hal": ["holds no code"],
                             "ivy": ["notebook format 3", "save it again"],
                             "kate": ['File "tensors.ipynb", cell 7, line 3, in broadcast_shape',
                                      "raise ValueError('not yet')"]})


LAYOUTS: dict[str, Callable[[Path], Expected]] = {
    f.__name__: f for f in (plain, nested_folders, github_classroom, moodle_folders, moodle_flat, canvas,
                            zips_inside, two_sets, stray_files, colliding_names, own_file_names, any_bytes_in_names, links,
                            notebooks)
}


# --- archives that cannot be unpacked ---

def _patch(data: bytes, local_offset: int, central_offset: int, value: int, width: str = "<H",
           combine: Callable[[int, int], int] = lambda old, new: new) -> bytes:
    """Set a field in the first local header and the first central directory header of a zip."""
    data = bytearray(data)
    for header, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        at = data.index(header) + offset
        (old,) = struct.unpack_from(width, data, at)
        struct.pack_into(width, data, at, combine(old, value))
    return bytes(data)


def encrypted(path: Path) -> Path:
    """A zip whose member says it is encrypted (general purpose flag bit 0)."""
    data = zip_bytes({"tensors.py": REFERENCE})
    path.write_bytes(_patch(data, 6, 8, 1, combine=lambda old, new: old | new))
    return path


def deflate64(path: Path) -> Path:
    """A zip whose member is compressed with Deflate64 (method 9, as Windows Explorer writes large zips)."""
    data = zip_bytes({"tensors.py": REFERENCE})
    path.write_bytes(_patch(data, 8, 10, 9))
    return path


def truncated(path: Path) -> Path:
    """A zip cut off half way (an upload that did not finish)."""
    data = zip_bytes({"tensors.py": REFERENCE, "notes.txt": "x" * 2000})
    path.write_bytes(data[: len(data) // 2])
    return path


def corrupt(path: Path) -> Path:
    """A zip whose compressed data is damaged (its directory is intact)."""
    data = bytearray(zip_bytes({"tensors.py": REFERENCE}))
    start = data.index(b"PK\x03\x04") + 30 + len("tensors.py")
    for i in range(start + 10, start + 60):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def not_a_zip(path: Path) -> Path:
    path.write_bytes(b"this is a Word document, renamed")
    return path


ARCHIVES: dict[str, tuple[Callable[[Path], Path], list[str]]] = {
    "encrypted": (encrypted, ["password", "without a password"]),
    "deflate64": (deflate64, ["Deflate64", "zip the files again"]),
    "truncated": (truncated, ["damaged or incomplete", "hand it in again"]),
    "corrupt": (corrupt, ["damaged or incomplete", "hand it in again"]),
    "not-a-zip": (not_a_zip, ["damaged or incomplete"]),
}
