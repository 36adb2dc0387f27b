"""Progress of a class run: a tqdm bar with ETA while grading, and a summary at the end."""

from __future__ import annotations

import statistics
import sys
from typing import TextIO

from tqdm import tqdm

from torchgrade.classroom.ledger import Record
from torchgrade.engine.scoring import Grade


class Progress:
    """A progress bar over the submissions to grade, with a line per graded submission above it."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        #: None: a bar only when the stream is a terminal (CI logs get the per-submission lines only).
        self.enabled = enabled
        self.bar: tqdm | None = None

    def start(self, to_grade: int, skipped: int) -> None:
        if skipped:
            self.write(f"{skipped} submission(s) already graded by this grader: skipped (--force regrades them)")
        self.bar = tqdm(total=to_grade, unit="submission", desc="grading", file=self.stream, dynamic_ncols=True,
                        disable=False if self.enabled else (None if self.enabled is None else True), smoothing=0.1)

    def graded(self, grade: Grade, record: Record) -> None:
        errors = f"  ({record.errors} error{'s' if record.errors != 1 else ''})" if record.errors else ""
        self.write(f"{grade.submission}: {grade.score:g} / {grade.max_score:g}{errors}")
        if self.bar is not None:
            self.bar.update(1)

    def write(self, line: str) -> None:
        tqdm.write(line, file=sys.stdout)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def summary_lines(records: list[Record], graded: list[str], skipped: list[str], crashed: list[str],
                  seconds: float, scores: list[float] | None = None) -> list[str]:
    """The end-of-run summary: counts, scores, errors, time and rate, where the time went. `scores`: the class's
    scores with the instructor's decisions applied (a record keeps the score of its grading)."""
    scores = [r.score for r in records] if scores is None else scores
    top = max((r.max_score for r in records), default=0.0)
    lines = [f"graded {len(graded)}, skipped {len(skipped)} already graded, {len(records)} in the class"]
    if scores:
        lines.append(f"score: mean {statistics.fmean(scores):.2f}, median {statistics.median(scores):.2f} "
                     f"(min {min(scores):g}, max {max(scores):g}) out of {top:g}")
    with_errors = sum(1 for r in records if r.errors)
    lines.append(f"errors: {with_errors} submission(s) with error checks (crash, timeout, memory)"
                 + (f"; {len(crashed)} not graded: the grading process died ({', '.join(crashed[:5])})" if crashed else ""))
    rate = len(graded) / seconds * 60 if seconds > 0 and graded else 0.0
    lines.append(f"time: {seconds:.1f} s, {rate:.1f} submissions/min")
    now = [r for r in records if r.name in set(graded)]
    per: dict[str, float] = {}
    for r in now:
        for exercise, s in r.exercise_seconds.items():
            per[exercise] = per.get(exercise, 0.0) + s
    if per and now:
        parts = ", ".join(f"{e} {s / len(now):.2f}" for e, s in sorted(per.items(), key=lambda kv: -kv[1]))
        lines.append(f"check time per submission, by exercise (s): {parts}")
    return lines
