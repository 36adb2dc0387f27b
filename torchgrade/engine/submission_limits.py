"""Submission limits on Gradescope: how often a student's submission is graded (counted), from the metadata.

The course's `submission_limit` (assignment.yaml) is a count per rolling period (`{count: 3, per: 24h}`:
`30m`, `24h`, `7d`) or per due date (`{count: 5, per: due_date}`: that many before the due date, and that
many again between it and the late due date; after the late due date no new allowance starts: that second
count goes on). The autograder counts from Gradescope's
/autograder/submission_metadata.json, as Gradescope documents it
(https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/): `created_at` (this
submission's time), `assignment.due_date` and `assignment.late_due_date`, and `previous_submissions`,
each with `submission_time`, `score` and `results` (that submission's results.json).

Over the limit, the submission is not graded: its results.json is the last counted submission's (score and
tests), with a message saying when the next counted try is possible, and it is marked
(`extra_data.submission_limit.counted: false`) so that later counts skip it. Gradescope's own advice for
rate limiting, on that page. A missing or garbled metadata file grades normally, with a note.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

#: `per:` as a rolling period: a number and a unit.
_PERIOD = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|h|d)\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
#: `per:` for a count per due date.
DUE_DATE = "due_date"
#: Where a torchgrade results.json says whether the submission counted.
MARK = "submission_limit"


class LimitError(ValueError):
    """The course's submission_limit is not one torchgrade understands (the message says why)."""


@dataclass(frozen=True)
class Limit:
    """At most `count` counted submissions per `period` (rolling), or per due date (`period` None)."""

    count: int
    period: timedelta | None
    text: str

    def __str__(self) -> str:
        return self.text


def parse(value: Any) -> Limit:
    """The limit `submission_limit:` says; LimitError saying what is wrong."""
    if not isinstance(value, dict) or set(value) != {"count", "per"}:
        raise LimitError(f"expected {{count: N, per: 24h}} (per: a period such as 30m, 24h, 7d, or {DUE_DATE}), "
                         f"got {value!r}")
    count, per = value["count"], value["per"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise LimitError(f"count: expected a whole number >= 1, got {count!r}")
    if per == DUE_DATE:
        return Limit(count, None, f"{count} per due date")
    match = _PERIOD.match(str(per))
    if not match or float(match[1]) <= 0:
        raise LimitError(f"per: expected a period such as 30m, 24h, 7d, or {DUE_DATE}, got {per!r}")
    return Limit(count, timedelta(**{_UNITS[match[2]]: float(match[1])}), f"{count} per {per}")


def _time(text: Any) -> datetime:
    moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return moment


@dataclass(frozen=True)
class Previous:
    """One earlier submission of the student's, as the metadata lists it."""

    time: datetime
    results: dict | None
    score: float | None = None  # the score Gradescope recorded for it (there even where results are not)

    @property
    def counted(self) -> bool:
        """Whether it counted: a submission this limit turned away is marked so in its results."""
        mark = ((self.results or {}).get("extra_data") or {}).get(MARK) or {}
        return mark.get("counted", True) is not False


@dataclass(frozen=True)
class Metadata:
    """What the limit needs of submission_metadata.json."""

    created_at: datetime
    due_date: datetime | None
    late_due_date: datetime | None
    previous: tuple[Previous, ...]


def read_metadata(path: Path) -> Metadata:
    """submission_metadata.json read as Gradescope documents it; ValueError (or OSError) saying what is wrong."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    assignment = data.get("assignment") or {}
    if not isinstance(assignment, dict):
        raise ValueError("assignment: not an object")
    previous = data.get("previous_submissions", [])
    if not isinstance(previous, list):
        raise ValueError("previous_submissions: not a list")
    earlier = []
    for i, entry in enumerate(previous):
        if not isinstance(entry, dict) or "submission_time" not in entry:
            raise ValueError(f"previous_submissions[{i}]: no submission_time")
        results, score = entry.get("results"), entry.get("score")
        score = float(score) if isinstance(score, (int, float, str)) and not isinstance(score, bool) \
            and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", str(score)) else None
        earlier.append(Previous(_time(entry["submission_time"]), results if isinstance(results, dict) else None, score))
    due, late = assignment.get("due_date"), assignment.get("late_due_date")
    return Metadata(created_at=_time(data["created_at"]) if "created_at" in data else _missing("created_at"),
                    due_date=_time(due) if due else None, late_due_date=_time(late) if late else None,
                    previous=tuple(sorted(earlier, key=lambda p: p.time)))


def _missing(key: str):
    raise ValueError(f"no {key}")


@dataclass(frozen=True)
class Verdict:
    """Whether this submission counts; if not, the results to keep and when the next counted try is possible."""

    counted: bool
    used: int
    kept: dict | None = None
    next_try: datetime | None = None
    #: Over the limit: the last counted submission (its results may be missing from the metadata).
    last: Previous | None = None


def _window(limit: Limit, meta: Metadata) -> tuple[datetime | None, datetime | None]:
    """The span whose counted submissions this one is counted with: [start, end)."""
    now = meta.created_at
    if limit.period is not None:
        return now - limit.period, None
    edges = [d for d in (meta.due_date, meta.late_due_date) if d is not None]
    if meta.late_due_date is not None and now >= meta.late_due_date:  # no new allowance after the late due date
        edges.remove(meta.late_due_date)
    start = max((d for d in edges if d <= now), default=None)
    end = min((d for d in edges if d > now), default=None)
    return start, end


def decide(limit: Limit, meta: Metadata) -> Verdict:
    """Count the student's counted submissions in this one's window; over the limit, what to keep instead."""
    start, end = _window(limit, meta)
    counted = [p for p in meta.previous if p.counted and p.time <= meta.created_at]
    if limit.period is not None:  # a rolling period: (now - period, now]
        inside = [p for p in counted if p.time > start]
    else:  # between due dates: [start, end)
        inside = [p for p in counted if (start is None or p.time >= start) and (end is None or p.time < end)]
    if len(inside) < limit.count:
        return Verdict(True, len(inside) + 1)
    last = counted[-1] if counted else None
    kept = last.results if last is not None else None  # the last counted one's, never an older one's
    if limit.period is not None:  # the oldest counted one in the window leaves it then
        next_try = inside[len(inside) - limit.count].time + limit.period
    else:
        next_try = end  # the next due date's window (None: no counted try is left)
    return Verdict(False, len(inside), kept, next_try, last)


def over_limit_document(verdict: Verdict, limit: Limit, placeholder: dict) -> dict:
    """The results.json of a submission over the limit: the last counted one's score and tests, with why,
    marked as not counted. Where its results are missing from the metadata, the student is told so: the score
    Gradescope recorded for it where there is one, no checks (`placeholder`, a score-0 document, gives the rest)."""
    when = (f"your next counted submission is possible from {verdict.next_try.isoformat(timespec='minutes')}"
            if verdict.next_try is not None else "no counted submission is left")
    head = f"Submission limit reached ({limit}; {verdict.used} counted): this submission was not graded"
    if verdict.kept is not None:
        kept = json.loads(json.dumps(verdict.kept))
        message = f"{head}, and the score and tests below are those of your last counted submission."
    else:
        kept = {k: v for k, v in placeholder.items() if k != "tests"}
        kept["tests"], kept["output"] = [], ""
        last = verdict.last
        at = f" (submitted {last.time.isoformat(timespec='minutes')})" if last is not None else ""
        if last is not None and last.score is not None:
            kept["score"] = last.score
            message = (f"{head}. The results of your last counted submission{at} are missing from what Gradescope "
                       f"gave the autograder, so its checks cannot be shown here; the score below is the one "
                       f"Gradescope recorded for it.")
        else:
            kept["score"] = 0.0
            message = (f"{head}. The results of your last counted submission{at} are missing from what Gradescope "
                       f"gave the autograder, so neither its score nor its checks can be shown here (this one "
                       f"scores 0; Gradescope keeps the earlier one in your submission history).")
    kept["output"] = "\n".join(part for part in (f"{message} {when[0].upper()}{when[1:]}.", kept.get("output", "")) if part)
    extra = kept.setdefault("extra_data", {})
    extra[MARK] = {"counted": False, "limit": str(limit), "used": verdict.used,
                   "next_try": verdict.next_try.isoformat() if verdict.next_try is not None else None}
    return kept


def counted_mark(verdict: Verdict, limit: Limit) -> dict:
    """What a counted submission's results.json says of the limit (extra_data.submission_limit)."""
    return {"counted": True, "limit": str(limit), "used": verdict.used}
