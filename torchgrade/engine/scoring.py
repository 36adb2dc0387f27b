"""Scoring: a function from check results to points, decided in the trusted process only."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from torchgrade.engine.config import Assignment
from torchgrade.engine.i18n import t

STATUSES = ("passed", "failed", "error", "skipped")


@dataclass
class CheckResult:
    """One check run on one device, as the trusted side judged it."""

    nodeid: str
    name: str
    exercise: str
    target: str
    device: str | None
    visibility: str
    status: str
    output: str = ""
    #: The check failed because the target used a forbidden call; the whole target then scores zero.
    forbidden: bool = False
    duration: float = 0.0
    score: float = 0.0
    max_score: float = 0.0
    #: Graded on the CUDA stand-in (a CUDA check on a machine without CUDA), not on a GPU.
    standin: bool = False
    #: Where an instructor's decision set `score` (torchgrade/classroom/overrides.py): torchgrade's own score, and the reason.
    automatic: float | None = None
    adjusted: str = ""
    #: An instructor excused this check: it leaves the total (overrides.py); its own points are kept.
    excused: bool = False


@dataclass
class Grade:
    """Everything graded for one submission."""

    submission: str
    tests: list[CheckResult]
    execution_time: float = 0.0
    #: Text for the whole submission: import failures, printed output, notes on devices and isolation.
    output: str = ""
    devices: list[str] = field(default_factory=list)
    isolation: str = "process"
    #: What watched torch's dispatcher for forbidden calls ("compiled observer", "profiler"; "" when unknown).
    watch: str = ""
    #: The course's cuda_standin policy where the CUDA checks were graded on the stand-in ("score" or
    #: "warn"), else "" (graded on a GPU, or set aside).
    standin: str = ""
    #: What the submission printed once hidden checks had begun: the instructor's only (results.py).
    hidden_output: str = ""
    #: The instructor's decisions applied to this grade (torchgrade/classroom/overrides.py; results.json's extra_data).
    adjustments: list[dict] = field(default_factory=list)
    #: Set by the instructor's decisions (overrides.py): the total before a late penalty (None: the checks' sum),
    #: and the fraction a late penalty leaves (applied last, to the total).
    total: float | None = None
    factor: float = 1.0
    #: The modules graded from a notebook, by the notebook's file name ({"attention": "attention.ipynb"}):
    #: pages and messages name such a module by its file.
    notebooks: dict[str, str] = field(default_factory=dict)

    def file_of(self, exercise: str) -> str:
        """The file a student handed in for `exercise`: its notebook, else `<exercise>.py`."""
        return self.notebooks.get(exercise) or f"{exercise}.py"

    @property
    def score(self) -> float:
        total = sum(t.score for t in self.tests) if self.total is None else self.total
        return round(total * self.factor, 4)

    @property
    def max_score(self) -> float:
        return round(sum(t.max_score for t in self.tests), 4)


def assign_points(results: list[CheckResult], assignment: Assignment) -> None:
    """Split each target's points equally over its graded (not skipped) checks, in place.

    A skipped check (a device that is not available or not selected) carries no points, so its
    share goes to the checks that ran: the points are set aside, not lost. A forbidden call seen in
    any check of a target costs the whole target.
    """
    by_target: dict[tuple[str, str], list[CheckResult]] = defaultdict(list)
    for r in results:
        by_target[(r.exercise, r.target)].append(r)
    for (exercise, name), checks in by_target.items():
        try:
            points = assignment.target(exercise, name).points
        except KeyError:
            points = 0.0
        graded = [c for c in checks if c.status != "skipped"]
        share = points / len(graded) if graded else 0.0
        # (a visible check's message where one has it: a hidden check's, line numbers included, is the instructor's)
        forbidden = min((c for c in checks if c.forbidden), key=lambda c: c.visibility != "visible", default=None)
        for c in checks:
            c.max_score = share if c.status != "skipped" else 0.0
            c.score = share if c.status == "passed" and forbidden is None else 0.0
            if forbidden is not None and c.status == "passed":
                c.status = "failed"
                c.output = t("scored_zero", why=forbidden.output.splitlines()[0] if forbidden.visibility == "visible"
                             else t("forbidden_in_a_hidden_check"))


def points_text(value: float) -> str:
    """Points as every page and line shows them: two decimals at most, no trailing zeros (8.5, 10, 0.33)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def missing_module(assignment: Assignment, exercise: str, lang: str | None = None) -> str:
    """The one line a report gives a module the submission lacks (each of its checks carries it, from
    torchgrade.engine.differential)."""
    points = assignment.exercise(exercise).points
    return t("missing_module", lang, exercise=exercise, points=points_text(points))
