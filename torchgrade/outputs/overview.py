"""The class overview page: score distribution, item analysis, the students' table, from index.html."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

from torchgrade.engine.config import Assignment
from torchgrade.outputs.exports import exercise_scores
from torchgrade.engine.i18n import t
from torchgrade.outputs.report import _env  # the one jinja Environment (autoescaped), shared with the per-student report
from torchgrade.engine.scoring import Grade

#: Bars in the score histogram.
BINS = 10


@dataclass(frozen=True)
class Bin:
    """One bar of the score histogram: scores in [low, high) (the last bar includes its high end)."""

    low: float
    high: float
    count: int


@dataclass(frozen=True)
class ItemStat:
    """How the class did on one check (item analysis) or one exercise."""

    name: str
    exercise: str
    target: str
    passed: int
    graded: int
    errors: int

    @property
    def rate(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


def histogram(scores: list[float], max_score: float, bins: int = BINS) -> list[Bin]:
    """Scores in `bins` equal bars from 0 to max_score."""
    width = (max_score or 1.0) / bins
    counts = [0] * bins
    for s in scores:
        counts[min(bins - 1, max(0, int(s / width + 1e-9)))] += 1
    return [Bin(round(i * width, 4), round((i + 1) * width, 4), c) for i, c in enumerate(counts)]


def item_analysis(grades: list[Grade]) -> list[ItemStat]:
    """Each check's pass rate over the students it was graded for, the hardest first."""
    seen: dict[str, list] = {}
    for g in grades:
        for t in g.tests:
            if t.status == "skipped":
                continue
            stat = seen.setdefault(t.name, [t.exercise, t.target, 0, 0, 0])
            stat[2] += t.status == "passed"
            stat[3] += 1
            stat[4] += t.status == "error"
    items = [ItemStat(name, ex, target, p, n, e) for name, (ex, target, p, n, e) in seen.items()]
    return sorted(items, key=lambda i: (i.rate, i.exercise, i.name))


def exercise_analysis(grades: list[Grade], assignment: Assignment) -> list[dict]:
    """Per exercise: mean points, students with full marks, and its checks' pass rate."""
    rows = []
    for e in assignment.exercises:
        tests = [t for g in grades for t in g.tests if t.exercise == e.name and t.status != "skipped"]
        if not tests:
            continue
        full = 0
        means = []
        for g in grades:
            mine = [t for t in g.tests if t.exercise == e.name]
            score, top = sum(t.score for t in mine), sum(t.max_score for t in mine)
            means.append(score)
            full += top > 0 and score >= top - 1e-9
        passed = sum(t.status == "passed" for t in tests)
        rows.append({"name": e.name, "title": e.title, "points": e.points, "mean": statistics.fmean(means),
                     "full": full, "rate": passed / len(tests), "errors": sum(t.status == "error" for t in tests)})
    return rows


def class_summary(grades: list[Grade]) -> dict:
    """Counts and the centre of the score distribution."""
    scores = [g.score for g in grades]
    return {"count": len(grades), "max_score": max((g.max_score for g in grades), default=0.0),
            "mean": statistics.fmean(scores) if scores else 0.0,
            "median": statistics.median(scores) if scores else 0.0,
            "with_errors": sum(any(t.status == "error" for t in g.tests) for g in grades)}


def devices(grades: list[Grade]) -> list[tuple[str, int]]:
    """Each device graded on, with how many submissions were graded on it."""
    counts = Counter(d for g in grades for d in g.devices)
    return sorted(counts.items())


def standin_policies(grades: list[Grade]) -> list[tuple[str, int]]:
    """Each cuda_standin policy some submissions' CUDA checks were graded under on the CUDA stand-in (not a
    GPU), with how many submissions: their device facts on cuda are the stand-in's (docs/devices.md)."""
    return sorted(Counter(g.standin for g in grades if g.standin).items())


def render_index(grades: list[Grade], assignment: Assignment, links: dict[str, str],
                 similarity: str | None = None) -> str:
    """The class overview page (index.html); `similarity`: the link to the similarity report, if there is one."""
    summary = class_summary(grades)
    per_exercise = {g.submission: exercise_scores(g, assignment) for g in grades}
    errors = defaultdict(int, {g.submission: sum(t.status == "error" for t in g.tests) for g in grades})
    return _env.get_template("index.html").render(
        grades=grades, assignment=assignment, links=links, summary=summary,
        bins=histogram([g.score for g in grades], summary["max_score"]),
        exercises=exercise_analysis(grades, assignment), items=item_analysis(grades),
        per_exercise=per_exercise, errors=errors, devices=devices(grades), standin=standin_policies(grades),
        standin_line=lambda policy: t("standin_graded", "en", policy=policy),  # (the page is in English)
        exercise_names=[e.name for e in assignment.exercises],
        adjusted=[g for g in grades if g.adjustments], similarity=similarity)
