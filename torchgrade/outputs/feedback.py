"""What a student sees of one grade: exercises, their targets, failures first with hints and a rerun command.

The terminal (torchgrade/outputs/terminal.py) and the report page (templates/report.html) both render this
view, so they say the same things. Hidden checks are shown by name and verdict only unless the view
is built for an instructor, which also shows what was printed during them (`Grade.hidden_output`);
only the instructor's results.json keeps their messages (torchgrade/engine/results.py).
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass, field

from torchgrade.engine.config import Assignment
from torchgrade.engine.i18n import MESSAGES, t
from torchgrade.engine.scoring import CheckResult, Grade, missing_module

#: "hint: " and "提示：", how a message's last line starts when it is a hint (torchgrade/engine/differential.py).
_HINT_PREFIXES = tuple(text.split("{")[0] for text in MESSAGES["hint"].values())
_PRINTED = re.compile(r"^--- printed by (.+?) ---$", re.MULTILINE)


@dataclass
class CheckView:
    """One check as a student reads it."""

    result: CheckResult
    #: The claim the check makes ("infers the dimension given as minus one"), without exercise and target.
    claim: str
    #: The failure message without its hint ("" for a pass, and for a hidden check outside an instructor view).
    message: str
    hint: str
    #: A command that runs just this check again (None for checks that passed or were skipped).
    rerun: str | None
    hidden: bool
    not_implemented: bool
    #: Its module is missing from the submission: the exercise says so once, with no rerun per check.
    missing: bool = False

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def failed(self) -> bool:
        return self.result.status in ("failed", "error")


@dataclass
class TargetView:
    """One graded name (``view``) and its checks."""

    exercise: str
    name: str
    checks: list[CheckView]

    @property
    def qualname(self) -> str:
        return f"{self.exercise}.{self.name}"

    @property
    def score(self) -> float:
        return sum(c.result.score for c in self.checks)

    @property
    def max_score(self) -> float:
        return sum(c.result.max_score for c in self.checks)

    @property
    def failures(self) -> list[CheckView]:
        return [c for c in self.checks if c.failed]

    @property
    def ran(self) -> list[CheckView]:
        return [c for c in self.checks if c.status != "skipped"]

    @property
    def status(self) -> str:
        """passed, failed, not_implemented (every failure says so) or skipped (nothing ran)."""
        if not self.ran:
            return "skipped"
        failures = self.failures
        if not failures:
            return "passed"
        return "not_implemented" if all(c.not_implemented for c in failures) else "failed"


@dataclass
class ExerciseView:
    """One module (``tensors.py``) and its targets, in assignment order."""

    name: str
    title: str
    targets: list[TargetView]
    #: "conv.py is missing: its 18 points are not graded" where the submission lacks the module, else None.
    missing: str | None = None
    #: The file it was graded from, as pages name it: `tensors.py`, or the notebook `tensors.ipynb`.
    file: str = ""

    def __post_init__(self) -> None:
        self.file = self.file or f"{self.name}.py"

    @property
    def score(self) -> float:
        return sum(t.score for t in self.targets)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.targets)

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0

    @property
    def passed(self) -> bool:
        return all(t.status in ("passed", "skipped") for t in self.targets)


@dataclass
class SubmissionView:
    """Everything a report says about one graded submission."""

    grade: Grade
    exercises: list[ExerciseView]
    instructor: bool
    #: Why checks were skipped, with how many: [("CUDA is not available ...", 11)].
    skipped: list[tuple[str, int]] = field(default_factory=list)
    #: Lines about the grading itself (devices, isolation), before any printed output.
    notes: str = ""
    #: What the student's code printed, per target: [("tensors.view", "...")].
    printed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def percent(self) -> float:
        return 100.0 * self.grade.score / self.grade.max_score if self.grade.max_score else 0.0

    @property
    def failures(self) -> list[CheckView]:
        return [c for e in self.exercises for tv in e.targets for c in tv.failures]

    @property
    def adjusted(self) -> list[str]:
        """"adjusted by the instructor: <reason>" per decision (the instructor's view: both scores, any flag)."""
        from torchgrade.engine.results import adjustment_lines

        return adjustment_lines(self.grade, instructor=self.instructor)


def split_hint(output: str) -> tuple[str, str]:
    """A failure message and the hint at its end (see torchgrade/engine/differential.py), apart."""
    lines = output.rstrip("\n").split("\n")
    if lines and lines[-1].startswith(_HINT_PREFIXES):
        last = lines.pop()
        prefix = next(p for p in _HINT_PREFIXES if last.startswith(p))
        return "\n".join(lines), last[len(prefix):]
    return output, ""


#: The command a rerun line starts with in a terminal; the in-notebook check's is `%torchgrade check`
#: (torchgrade/notebook.py), run in the kernel where the student is.
CHECK_COMMAND = "torchgrade check"
#: Where a student's notebooks are in their course folder (the bundle's `notebooks/`): a rerun line of a
#: module graded from a notebook checks that folder.
NOTEBOOKS_FOLDER = "notebooks"


def rerun_command(result: CheckResult, path: str | None = None, assignment: str | None = None,
                  command: str = CHECK_COMMAND) -> str:
    """A `torchgrade check` command line (or `command`'s) that runs just this check (on its device) again."""
    function = result.nodeid.split("::")[-1]
    base, _, params = function.partition("[")
    params = params.rstrip("]")
    selector = f"{result.exercise}.{result.target}::"
    selector += base if not params or params == result.device else function
    words = [*command.split(), selector]
    if result.device:
        words += ["--device", result.device]
    if path:
        words += ["--path", path]
    if assignment:  # the course was named, not found from the current folder: name it again
        words += ["--assignment", assignment]
    return " ".join(w if w.startswith("%") else shlex.quote(w) for w in words)


def _claim(result: CheckResult) -> str:
    name = result.name
    prefix = f"{result.exercise}.{result.target}: "
    name = name[len(prefix):] if name.startswith(prefix) else name
    if result.device and name.endswith(f" [{result.device}]"):
        name = name[: -len(result.device) - 3]
    return name


def _missing_lines(assignment: Assignment) -> dict[str, str]:
    """{the missing-module line in each language: exercise}."""
    from torchgrade.engine.i18n import LANGUAGES

    return {missing_module(assignment, e.name, lang): e.name for e in assignment.exercises for lang in LANGUAGES}


def _check_view(result: CheckResult, instructor: bool, path: str | None, assignment: str | None,
                missing: dict[str, str] | None = None, command: str = CHECK_COMMAND) -> CheckView:
    hidden = result.visibility != "visible"
    failed = result.status in ("failed", "error")
    if failed and (missing or {}).get(result.output) == result.exercise:
        return CheckView(result=result, claim=_claim(result), message=result.output, hint="", rerun=None,
                         hidden=hidden, not_implemented=False, missing=True)
    message, advice = split_hint(result.output) if failed else (result.output, "")
    if hidden and not instructor:
        message, advice = "", ""
    not_implemented = failed and "NotImplementedError" in result.output.split("\n", 1)[0]
    return CheckView(result=result, claim=_claim(result), message=message, hint=advice,
                     rerun=rerun_command(result, path, assignment, command) if failed and not hidden else None,
                     hidden=hidden,
                     not_implemented=not_implemented)


def build(grade: Grade, assignment: Assignment, *, instructor: bool = False, path: str | None = None,
          assignment_arg: str | None = None, command: str = CHECK_COMMAND) -> SubmissionView:
    """The view of one grade; `path` and `assignment_arg` are the --path and --assignment to repeat in
    rerun commands, `command` what they start with. `path` "" is the default folder (`torchgrade check`
    without --path); None, a folder not known (a report of `grade` or the autograder): the student's
    own, where a module graded from a notebook is in the course's `notebooks/`."""
    by_target: dict[tuple[str, str], list[CheckView]] = {}
    missing = _missing_lines(assignment)
    for result in grade.tests:
        where = path if path is not None or command != CHECK_COMMAND or result.exercise not in grade.notebooks \
            else NOTEBOOKS_FOLDER
        by_target.setdefault((result.exercise, result.target), []).append(
            _check_view(result, instructor, where, assignment_arg, missing, command))
    exercises = []
    for exercise in assignment.exercises:
        targets = [TargetView(exercise.name, t.name, by_target.pop((exercise.name, t.name)))
                   for t in exercise.targets if (exercise.name, t.name) in by_target]
        if targets:
            lacking = next((c.message for tv in targets for c in tv.checks if c.missing), None)
            exercises.append(ExerciseView(exercise.name, exercise.title, targets, missing=lacking,
                                          file=grade.file_of(exercise.name)))
    for (exercise, name), checks in by_target.items():  # checks of targets the assignment does not list
        exercises.append(ExerciseView(exercise, exercise, [TargetView(exercise, name, checks)],
                                      file=grade.file_of(exercise)))
    skipped = Counter((r.output if instructor or r.visibility == "visible" else t("hidden_check_details")).split("\n", 1)[0]
                      for r in grade.tests if r.status == "skipped")  # a hidden check's reason is the instructor's
    notes, printed = _split_output(grade.output)
    if instructor and grade.hidden_output:
        printed += [(f"{key} (during hidden checks)", text) for key, text in _split_output(grade.hidden_output)[1]]
    return SubmissionView(grade=grade, exercises=exercises, instructor=instructor,
                          skipped=sorted(skipped.items(), key=lambda kv: -kv[1]), notes=notes, printed=printed)


def _split_output(output: str) -> tuple[str, list[tuple[str, str]]]:
    """The grade's notes, and what each target printed (the plugin writes ``--- printed by KEY ---`` blocks)."""
    pieces = _PRINTED.split(output)
    # The devices are in every report's header already; notes are whatever else the grading said.
    notes = "\n".join(line for line in pieces[0].strip().splitlines() if not line.startswith("graded on:"))
    printed = [(pieces[i], pieces[i + 1].strip("\n")) for i in range(1, len(pieces) - 1, 2)]
    return notes, printed
