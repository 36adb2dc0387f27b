"""HTML reports: one page per submission and a class overview, from jinja2 templates (autoescaped)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import jinja2

from torchgrade.engine.config import Assignment
from torchgrade.engine.results import write_atomic
from torchgrade.engine.scoring import CheckResult, Grade, points_text

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("torchgrade", "templates"),
    autoescape=True,  # everything a student controls (messages, printed output, names) is untrusted
    trim_blocks=True,
    lstrip_blocks=True,
)


_env.filters["points"] = points_text


def exercise_rows(grade: Grade, assignment: Assignment) -> list[dict]:
    """Per exercise: title, score, max score and its checks, in assignment order."""
    checks: dict[str, list[CheckResult]] = defaultdict(list)
    for t in grade.tests:
        checks[t.exercise].append(t)
    rows = []
    for exercise in assignment.exercises:
        tests = checks.get(exercise.name, [])
        if not tests:
            continue
        rows.append({
            "name": exercise.name,
            "title": exercise.title,
            "score": sum(t.score for t in tests),
            "max_score": sum(t.max_score for t in tests),
            "tests": tests,
            "failed": [t for t in tests if t.status in ("failed", "error")],
        })
    return rows


def render_report(grade: Grade, assignment: Assignment, *, lang: str | None = None, instructor: bool = False) -> str:
    """The per-submission report page (hidden checks' messages only with `instructor`; see torchgrade/outputs/feedback.py)."""
    from torchgrade.outputs import feedback
    from torchgrade.engine.i18n import language, t

    lang = lang or language()
    return _env.get_template("report.html").render(
        grade=grade, assignment=assignment, exercises=exercise_rows(grade, assignment), lang=lang,
        view=feedback.build(grade, assignment, instructor=instructor), t=lambda name, /, **v: t(name, lang, **v))


def write_report(grade: Grade, assignment: Assignment, path: Path, *, lang: str | None = None,
                 instructor: bool = False) -> None:
    write_atomic(path, render_report(grade, assignment, lang=lang, instructor=instructor))
