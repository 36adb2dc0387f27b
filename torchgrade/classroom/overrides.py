"""The instructor's decisions: score overrides that survive every regrade, resume, merge and export.

`DIR/overrides.yaml` (DIR: the --out folder of `torchgrade grade`) is a list of decisions the instructor
edits by hand; torchgrade never writes it. Each decision names a student (a submission's name, as in
grades.csv), what it covers (the whole submission; `target: exercise.target`; or `check:` one check's name
as results.json gives it), what it sets (`points:` the new score of what it covers, or `verdict: passed`
(full points) / `failed` (none)) and a `reason:` the student sees. For example:

    - student: alice
      target: conv.corr2d
      points: 2.5
      reason: the loop order was allowed in the lecture of 12 November

Torchgrade's scores stay what they are (nbgrader keeps manual and automatic scores apart so that a regrade
keeps the manual ones): a grade is always computed or read back (results.read_grade) with its automatic
scores, and `Overrides.apply` sets the instructor's on top, after every `grade` (new, resumed or --force),
`merge` and export (grades.csv, Canvas/Moodle, JUnit, index.html). The student's report says "adjusted by
the instructor: <reason>"; the instructor's copy shows both scores (CheckResult.automatic).

A decision is made about a submission as it was: the content hash of the submission it was first applied
to is kept in DIR/.overrides-seen.json (or given as `content:` in the decision). When the student's files
change afterwards (a late file, a resubmission) the decision is still applied and flagged for review, with
the new content hash to write as `content:` once reviewed. A decision for a student or target that does not
exist is a mistake, not a decision: loading fails with one line naming it (the commands exit 2, having
written nothing).
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import yaml

from torchgrade.engine.config import Assignment
from torchgrade.engine.scoring import Grade

FILE_NAME = "overrides.yaml"
SEEN_NAME = ".overrides-seen.json"
VERDICTS = ("passed", "failed", "excused")
_KEYS = ("student", "target", "check", "points", "verdict", "penalty", "reason", "content")
#: The order decisions apply in: the most specific wins where two cover a check (a check's over its target's
#: over the whole score's), and a late penalty applies last, to the total.
_ORDER = {"submission": 0, "target": 1, "check": 2, "penalty": 3}


class OverridesError(Exception):
    """The overrides file is not usable: one line naming the entry and what is wrong."""


@dataclass(frozen=True)
class Override:
    """One decision of the instructor's."""

    line: int
    student: str
    kind: str  # submission, target or check
    scope: str  # "" for the submission, exercise.target, or a check's name
    points: float | None
    verdict: str | None
    reason: str
    content: str | None
    penalty: float | None = None  # a late penalty: the fraction of the total taken off

    @property
    def key(self) -> str:
        return f"{self.student}|{self.kind}|{self.scope}"

    def covers(self, test) -> bool:
        if self.kind == "submission":
            return True
        if self.kind == "target":
            return f"{test.exercise}.{test.target}" == self.scope
        return test.name == self.scope

    @property
    def described(self) -> str:
        if self.kind == "penalty":
            return f"late penalty {self.penalty:.0%}"
        return {"submission": "the whole submission", "target": f"target {self.scope}"}.get(self.kind, f"check '{self.scope}'")


def _where(path: Path, line: int) -> str:
    return f"{path}: entry at line {line}"


def _near(name: str, known: Iterable[str]) -> str:
    near = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{near[0]}'?)" if near else ""


class _Lines(yaml.SafeLoader):
    """A YAML loader that remembers the line of each entry (for messages)."""


def _mapping_with_line(loader, node):
    mapping = loader.construct_mapping(node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_Lines.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_line)


def check_names(folders: Iterable[Path]) -> set[str]:
    """The checks' names as a graded student's results.json gives them (every grade lists every check, the
    set-aside ones too): the first readable one in `folders` (output folders of `torchgrade grade`)."""
    from torchgrade.engine.results import INSTRUCTOR_FOLDER

    for folder in folders:
        for path in sorted(Path(folder).glob(f"*/{INSTRUCTOR_FOLDER}/results.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                return {t["name"] for t in data["tests"]} | {t["name"] for t in data["extra_data"].get("skipped_checks", [])}
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return set()


def parse(path: Path, assignment: Assignment, students: Iterable[str], checks: Iterable[str] = ()) -> list[Override]:
    """The decisions in `path`, checked against the class (`students`), the course and its checks' names
    (`checks`; none before anything is graded: then a decision for a check that is not there is flagged when
    applied); OverridesError if any is wrong. A file that is not there holds no decisions."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Lines)  # noqa: S506 (a SafeLoader)
    except (OSError, UnicodeDecodeError) as e:
        raise OverridesError(f"{path}: cannot read it ({e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise OverridesError(f"{path}{f' line {mark.line + 1}' if mark else ''}: not valid YAML "
                             f"({getattr(e, 'problem', e)})") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise OverridesError(f"{path}: expected a list of decisions (- student: NAME ...), see docs/class-grading.md")
    students = set(students)
    checks = set(checks)
    targets = {t.qualname for t in assignment.targets}
    found: list[Override] = []
    seen: dict[str, int] = {}
    for entry in data:
        if not isinstance(entry, dict):
            raise OverridesError(f"{path}: every decision is a mapping (- student: NAME ...), got {entry!r}")
        line = entry.pop("__line__")
        where = _where(path, line)
        unknown = [k for k in entry if k not in _KEYS]
        if unknown:
            raise OverridesError(f"{where}: unknown key '{unknown[0]}'{_near(str(unknown[0]), _KEYS)}")
        student = str(entry.get("student", ""))
        if not student:
            raise OverridesError(f"{where}: no student")
        if student not in students:
            raise OverridesError(f"{where}: unknown student '{student}'{_near(student, students)} (no submission of "
                                 "that name in this class)")
        if "target" in entry and "check" in entry:
            raise OverridesError(f"{where}: give a target or a check, not both")
        kind, scope = "submission", ""
        if "target" in entry:
            kind, scope = "target", str(entry["target"])
            if scope not in targets:
                raise OverridesError(f"{where}: unknown target '{scope}'{_near(scope, targets)} (exercise.target)")
        elif "check" in entry:
            kind, scope = "check", str(entry["check"])
            owner = scope.split(":", 1)[0]
            if owner not in targets:
                raise OverridesError(f"{where}: unknown check '{scope}'{_near(scope, checks)}: a check's name starts "
                                     "with its target (exercise.target: ...), as results.json and the report give it")
            if checks and scope not in checks:
                raise OverridesError(f"{where}: unknown check '{scope}'{_near(scope, checks)} (no check of that name "
                                     "in this class's results.json)")
        penalty = entry.get("penalty")
        if penalty is not None:
            if kind != "submission" or "points" in entry or "verdict" in entry:
                raise OverridesError(f"{where}: a penalty is a decision of its own, for the whole submission (no "
                                     "target, check, points or verdict)")
            if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not 0 <= penalty <= 1:
                raise OverridesError(f"{where}: penalty: expected the fraction of the total taken off, from 0 to 1 "
                                     f"(0.15 takes 15% off), got {penalty!r}")
            kind = "penalty"
        elif ("points" in entry) == ("verdict" in entry):
            raise OverridesError(f"{where}: give either points, a verdict ({' or '.join(VERDICTS)}) or a penalty")
        points = entry.get("points")
        if points is not None:
            top = (assignment.max_score if kind == "submission" else
                   assignment.target(*scope.split(":", 1)[0].split(".", 1)).points)
            if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 <= points <= top:
                raise OverridesError(f"{where}: points: expected a number from 0 to {top:g} for "
                                     f"{kind if kind != 'check' else 'its target'}, got {points!r}")
        verdict = entry.get("verdict")
        if verdict is not None and verdict not in VERDICTS:
            raise OverridesError(f"{where}: verdict: expected {' or '.join(VERDICTS)}, got {verdict!r}")
        if verdict == "excused" and kind == "submission":
            raise OverridesError(f"{where}: verdict: excused is for a check or a target (the whole submission cannot "
                                 "leave its own total)")
        reason = str(entry.get("reason") or "").strip()
        if not reason:
            raise OverridesError(f"{where}: no reason (the student sees it: \"adjusted by the instructor: <reason>\")")
        override = Override(line, student, kind, scope, None if points is None else float(points), verdict, reason,
                            str(entry["content"]) if entry.get("content") else None,
                            None if penalty is None else float(penalty))
        if override.key in seen:
            raise OverridesError(f"{where}: a second decision for {student}, {override.described} (the first is at "
                                 f"line {seen[override.key]})")
        seen[override.key] = line
        found.append(override)
    return sorted(found, key=lambda o: (o.student, _ORDER[o.kind], o.line))


class Overrides:
    """The decisions of one output folder, applied to grades; `remember` keeps which content each was made on."""

    def __init__(self, out: Path, decisions: list[Override], seen: dict[str, str]):
        self.out = Path(out)
        self.decisions = decisions
        self.seen = seen
        self._changed = False

    @classmethod
    def load(cls, out: Path, assignment: Assignment, students: Iterable[str], graded: Iterable[Path] = ()) -> "Overrides":
        """DIR/overrides.yaml checked against `students` and the checks' names of the grades in DIR (or in the
        `graded` folders: a merge's shards); OverridesError naming a wrong entry."""
        decisions = parse(Path(out) / FILE_NAME, assignment, students, check_names([Path(out), *graded]))
        try:
            seen = json.loads((Path(out) / SEEN_NAME).read_text(encoding="utf-8"))
            seen = seen if isinstance(seen, dict) else {}
        except (OSError, ValueError):
            seen = {}
        return cls(out, decisions, seen)

    def __bool__(self) -> bool:
        return bool(self.decisions)

    def apply(self, grade: Grade, content: str | None) -> Grade:
        """Set the instructor's decisions for this student on `grade` (in place; returned), from its automatic
        scores; `content` is the submission's content hash (the ledger's), to flag decisions made on other files.

        The rule (docs/class-grading.md): the most specific decision wins (a check's over its target's over the
        whole score's); an excused check leaves the total (the other checks' share of their points, scaled to
        the full points); a whole-score decision is the final score, changed only by what narrower decisions
        change; a late penalty applies last, to the total."""
        for t in grade.tests:  # from the automatic scores, whatever was applied before
            if t.automatic is not None:
                t.score, t.automatic, t.adjusted = t.automatic, None, ""
            t.excused = False
        grade.adjustments, grade.total, grade.factor = [], None, 1.0
        automatic = sum(t.score for t in grade.tests)
        whole: tuple[Override, float, str] | None = None
        decided: set[int] = set()  # the checks a narrower decision set
        for o in sorted((o for o in self.decisions if o.student == grade.submission), key=lambda o: -_ORDER[o.kind]):
            review = self._review(o, content)
            if o.kind == "penalty":
                continue
            if o.kind == "submission":
                top = grade.max_score
                whole = (o, top if o.verdict == "passed" else 0.0 if o.verdict == "failed" else min(o.points or 0.0, top),
                         review)
                continue
            tests = [t for t in grade.tests if t.status != "skipped" and o.covers(t) and id(t) not in decided]
            everything = [t for t in grade.tests if t.status != "skipped" and o.covers(t)]
            top = sum(t.max_score for t in tests)
            if not everything or sum(t.max_score for t in everything) <= 0:
                review = review or "it covers no graded check of this submission: review it"
                grade.adjustments.append(_adjustment(o, None, None, 0.0, review))
                continue
            if not tests:  # every check it covers has a decision of its own
                review = review or "every check it covers has a decision of its own, which wins: review it"
                grade.adjustments.append(_adjustment(o, None, None, 0.0, review))
                continue
            before = sum(t.score for t in tests)
            if o.verdict == "excused":
                for t in tests:
                    t.automatic, t.excused, t.adjusted = t.score, True, o.reason
                grade.adjustments.append(_adjustment(o, round(before, 4), None, round(top, 4), review, excused=True))
            else:
                # a target's points are its checks'; the checks a narrower decision set keep theirs
                full = sum(t.max_score for t in everything)
                wanted = top if o.verdict == "passed" else 0.0 if o.verdict == "failed" else min(o.points or 0.0, full) * top / full
                for t in tests:
                    t.automatic = t.score
                    t.score = t.max_score * wanted / top
                    t.adjusted = o.reason
                grade.adjustments.append(_adjustment(o, round(before, 4), round(sum(t.score for t in everything), 4),
                                                     round(full, 4), review))
            decided.update(id(t) for t in tests)
        counted = [t for t in grade.tests if not t.excused]
        total = sum(t.score for t in counted)
        if len(counted) < len(grade.tests):  # excused checks leave the total: the rest scaled to the full points
            room = sum(t.max_score for t in counted)
            total = total * grade.max_score / room if room > 0 else grade.max_score
            grade.total = total
        if whole is not None:
            o, points, review = whole
            changed = total - automatic  # what the narrower decisions changed
            grade.total = min(max(points + changed, 0.0), grade.max_score)
            grade.adjustments.insert(0, _adjustment(o, round(automatic, 4), round(points, 4), grade.max_score, review))
        for o in (o for o in self.decisions if o.student == grade.submission and o.kind == "penalty"):
            grade.factor = 1.0 - (o.penalty or 0.0)
            # the score it was applied to is not torchgrade's own (other decisions may have set it): none is shown
            grade.adjustments.append(_adjustment(o, None, grade.score, grade.max_score, self._review(o, content)))
        return grade

    def _review(self, o: Override, content: str | None) -> str:
        """The flag of a decision made on other files than these (and the first content it was applied to kept)."""
        made_on = o.content or self.seen.get(o.key)
        if content is not None and made_on is None:
            self.seen[o.key] = content
            self._changed = True
        elif content is not None and made_on != content:
            return f"the submission changed since this decision was made: review it, then add `content: {content}` to it"
        return ""

    def remember(self) -> None:
        """Keep the content each decision was first applied to (DIR/.overrides-seen.json), if that changed."""
        if not self._changed:
            return
        from torchgrade.engine.results import write_atomic

        write_atomic(self.out / SEEN_NAME, json.dumps(self.seen, indent=1, sort_keys=True) + "\n")
        self._changed = False


def _adjustment(o: Override, automatic: float | None, points: float | None, top: float | None, review: str,
                excused: bool = False) -> dict:
    """What a grade records of one decision applied (results.json's extra_data.adjustments)."""
    return {"scope": o.described, "reason": o.reason, "automatic": automatic, "points": points, "max_score": top,
            "review": review, **({"excused": True} if excused else {})}


def none(out: Path | None = None) -> Overrides:
    """No decisions (where there is no output folder)."""
    return Overrides(Path(out or os.devnull), [], {})
