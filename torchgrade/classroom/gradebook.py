"""The grades a class folder holds, as an LMS export reads them: results.json per student, the decisions applied."""

from __future__ import annotations

from pathlib import Path

from torchgrade.classroom.ledger import Ledger
from torchgrade.classroom.overrides import Overrides, OverridesError
from torchgrade.engine.config import Assignment
from torchgrade.engine.scoring import Grade
from torchgrade.outputs.exports import load_grade
from torchgrade.outputs.lms import LMSError


def graded_class(out: Path, assignment: Assignment | None = None) -> list[Grade]:
    """Every grade in a `torchgrade grade` output folder (those its ledger lists, or every */results.json);
    with `assignment`, with the instructor's decisions in its overrides.yaml applied (torchgrade/classroom/overrides.py)."""
    records = Ledger(out).load()
    names = sorted(records) or sorted(p.parent.name for p in Path(out).glob("*/results.json"))
    if not names:
        raise LMSError(f"{out}: no graded submissions (not a folder written by `torchgrade grade`)")
    grades = []
    for name in names:
        try:
            grades.append(load_grade(Path(out) / name / "results.json"))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise LMSError(f"{Path(out) / name / 'results.json'}: cannot read it ({e})") from None
    if assignment is not None:
        try:
            decisions = Overrides.load(out, assignment, names)
        except OverridesError as e:
            raise LMSError(str(e)) from None
        for grade in grades:
            record = records.get(grade.submission)
            decisions.apply(grade, record.content if record else None)
    return grades
