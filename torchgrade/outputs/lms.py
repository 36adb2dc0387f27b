"""Gradebooks an LMS imports as they are: Canvas's gradebook CSV and Moodle's grade import CSV.

Each graded submission is matched to a student by the IDs in its name (the names Canvas and Moodle
give the files of a "download all submissions": `lms_ids`) or by a roster (a CSV: an LMS's own
gradebook export works as one; a `submission` column maps folder names explicitly). A submission
that matches no student, or several, is listed with the reason and left out of the file; a student
of the roster without a submission is listed and gets no grade (Canvas: a blank cell, which leaves
the gradebook as it is; Moodle: no row). Nothing is dropped silently.

The rules the files follow:
- Canvas, "How do I import grades in the Gradebook?"
  (https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807):
  the columns Student, ID, SIS User ID, SIS Login ID, Section, then one column per assignment (a
  name Canvas does not know creates the assignment); a second row "Points Possible" gives each
  assignment's points; Canvas finds the student by ID, SIS User ID or SIS Login ID.
- Moodle, "Grade import" (https://docs.moodle.org/en/Grade_import): a CSV (UTF-8, comma) whose
  first row names the columns; one column identifies the user (mapped from the file to a user
  field: email address, ID number, username or user id), another holds the grade, a number.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from torchgrade.engine.config import Assignment
from torchgrade.engine.scoring import Grade

CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
#: Roster columns that identify a Canvas student, in the order Canvas tries them.
CANVAS_IDS = ("ID", "SIS User ID", "SIS Login ID")
#: Roster columns Moodle can map a user by (its own export's headers), the first one present is used.
MOODLE_IDS = ("Email address", "ID number", "Username")
#: A roster column naming the submission folder of a student, for names that carry no LMS ID.
SUBMISSION_COLUMN = "submission"

_CANVAS_NAME = re.compile(r"^(?P<person>[^\W\d_]+)(?:_late)?_(?P<id>\d+)(?:_(?P<submission>\d+))?(?:_|$)", re.I)
_MOODLE_NAME = re.compile(r"^(?P<person>.+?)_(?P<id>\d+)_assign(?:submission|feedback)_\w*$")
_TRAILING_ID = re.compile(r"\((?P<id>[\w.@+-]+)\)\s*$")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class LMSError(Exception):
    """The roster cannot be used (unreadable, no column that identifies students)."""


@dataclass(frozen=True)
class SubmissionIds:
    """What a submission's name says about its student: IDs, and the student's name where it has one."""

    ids: tuple[str, ...]
    person: str | None = None


def lms_ids(name: str) -> SubmissionIds:
    """The student IDs in a submission's name, as Canvas and Moodle name downloaded submissions.

    Canvas: `doejane_12345_67890_tensors.py` or `doejane_late_12345_67890_...` (12345 is the
    student's Canvas ID); Moodle: `Jane Doe_1234567_assignsubmission_file_` (1234567 is the
    participant number); any name ending in `(ID)`. The whole name is always one of the IDs. This
    is the one place torchgrade reads IDs out of names.
    """
    ids = [name]
    person = None
    moodle = _MOODLE_NAME.match(name)
    canvas = _CANVAS_NAME.match(name)
    if moodle:
        ids.append(moodle["id"])
        person = moodle["person"]
    elif canvas:
        ids.append(canvas["id"])
        person = canvas["person"]
    trailing = _TRAILING_ID.search(name)
    if trailing:
        ids.append(trailing["id"])
        person = person or name[: trailing.start()].strip() or None
    return SubmissionIds(tuple(dict.fromkeys(ids)), person)


def _letters(text: str) -> str:
    """A person's name reduced to its letters, lower case: "Doe, Jane" and "doejane" compare equal."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def read_roster(path: Path) -> list[dict[str, str]]:
    """The roster's rows (a CSV with a header row; an Excel byte-order mark is fine)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise LMSError(f"{path}: cannot read the roster ({e})") from None
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        raise LMSError(f"{path}: the roster is empty (expected a header row, then one row per student)")
    rows = []
    for row in reader:
        row = {(k or "").strip(): (v or "").strip() for k, v in row.items() if k is not None}
        first = next(iter(row.values()), "")
        if first == "Points Possible" or not any(row.values()):  # Canvas's second row; blank lines
            continue
        rows.append(row)
    return rows


def _column(row_or_header, wanted: str) -> str | None:
    """The roster's name for a column, compared without case ("sis user id" is "SIS User ID")."""
    keys = row_or_header.keys() if isinstance(row_or_header, dict) else row_or_header
    return next((k for k in keys if k.casefold() == wanted.casefold()), None)


def _value(row: dict[str, str], wanted: str) -> str:
    key = _column(row, wanted)
    return row.get(key, "") if key else ""


def _person(row: dict[str, str]) -> list[str]:
    """The ways a roster row names its student, reduced to letters."""
    names = [_value(row, "Student"), _value(row, "Full name"), _value(row, "Name")]
    first, last = _value(row, "First name"), _value(row, "Last name")
    if first or last:
        names += [f"{first} {last}", f"{last} {first}"]
    return [_letters(n) for n in names if _letters(n)]


@dataclass
class Matching:
    """Which graded submission is which roster row, and what did not match."""

    #: (roster row, grade or None) in roster order.
    rows: list[tuple[dict[str, str], Grade | None]] = field(default_factory=list)
    #: (submission, why) for submissions that match no student or several.
    unmatched: list[tuple[str, str]] = field(default_factory=list)

    @property
    def missing(self) -> list[dict[str, str]]:
        """Roster students with no graded submission."""
        return [row for row, grade in self.rows if grade is None]


def match(grades: list[Grade], roster: list[dict[str, str]], id_columns: tuple[str, ...]) -> Matching:
    """Each grade's roster row: by an ID in its name, the roster's submission column, or the student's name."""
    taken: dict[int, str] = {}
    result = Matching()
    chosen: dict[int, Grade] = {}
    for grade in sorted(grades, key=lambda g: g.submission):
        found = lms_ids(grade.submission)
        keys = {i.casefold() for i in found.ids}
        candidates = [i for i, row in enumerate(roster)
                      if _value(row, SUBMISSION_COLUMN) == grade.submission
                      or any(_value(row, c) and _value(row, c).casefold() in keys for c in id_columns)]
        how = "ID"
        if not candidates and found.person and _letters(found.person):
            candidates = [i for i, row in enumerate(roster) if _letters(found.person) in _person(row)]
            how = "name"
        if not candidates:
            result.unmatched.append((grade.submission, "no roster row has an ID in its name"
                                     + (f" or the name '{found.person}'" if found.person else "")))
        elif len(candidates) > 1:
            result.unmatched.append((grade.submission, f"its {how} matches {len(candidates)} roster rows "
                                                        f"(rows {', '.join(str(i + 2) for i in candidates)})"))
        elif candidates[0] in taken:
            result.unmatched.append((grade.submission, f"its roster row (row {candidates[0] + 2}) is already "
                                                        f"matched by {taken[candidates[0]]}"))
        else:
            taken[candidates[0]] = grade.submission
            chosen[candidates[0]] = grade
    result.rows = [(row, chosen.get(i)) for i, row in enumerate(roster)]
    return result


def _number(value: float) -> str:
    """A score as a plain decimal number ("21.5", "5"), as both importers read them."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def _text(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_START) else value


def canvas_csv(grades: list[Grade], assignment: Assignment, roster: list[dict[str, str]] | None,
               column: str | None = None) -> tuple[str, Matching]:
    """Canvas's gradebook CSV: the five student columns, the assignment's column, a Points Possible row."""
    column = column or assignment.title
    if roster is None:  # the Canvas IDs in the download names are the roster
        roster = []
        for g in sorted(grades, key=lambda g: g.submission):
            m = _CANVAS_NAME.match(g.submission)
            if m:
                roster.append({"Student": m["person"], "ID": m["id"], "SIS User ID": "", "SIS Login ID": "",
                               "Section": ""})
    elif not any(_column(row, c) for row in roster[:1] for c in CANVAS_IDS):
        raise LMSError(f"the roster has none of the columns Canvas finds students by ({', '.join(CANVAS_IDS)}); "
                       "export the gradebook from Canvas and use that as the roster")
    matching = match(grades, roster, CANVAS_IDS)
    top = max((g.max_score for g in grades), default=assignment.max_score)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*CANVAS_STUDENT_COLUMNS, column])
    writer.writerow(["Points Possible", "", "", "", "", _number(top)])
    for row, grade in matching.rows:
        writer.writerow([_text(_value(row, c)) for c in CANVAS_STUDENT_COLUMNS]
                        + [_number(grade.score) if grade is not None else ""])
    return buffer.getvalue(), matching


def moodle_csv(grades: list[Grade], assignment: Assignment, roster: list[dict[str, str]],
               column: str | None = None) -> tuple[str, Matching]:
    """Moodle's grade import CSV: an identifier column (the roster's email, ID number or username) and the grade."""
    column = column or assignment.title
    identifier = next((c for c in MOODLE_IDS if roster and _column(roster[0], c)), None)
    if identifier is None:
        raise LMSError(f"the roster has none of the columns Moodle maps users by ({', '.join(MOODLE_IDS)}); "
                       "export the grades from Moodle (Export > Plain text file) and use that as the roster")
    matching = match(grades, roster, (*MOODLE_IDS, "ID"))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([identifier, column])
    for row, grade in matching.rows:
        if grade is None:
            continue
        if not _value(row, identifier):
            matching.unmatched.append((grade.submission, f"its roster row has no {identifier}"))
            continue
        writer.writerow([_text(_value(row, identifier)), _number(grade.score)])
    return buffer.getvalue(), matching
