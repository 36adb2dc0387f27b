"""The assignment file: exercises, targets, points, visibility and time limits, parsed once.

A course is the folder holding ``assignment.yaml``. It is found as pytest finds its rootdir: the
file in the current folder or the nearest parent (``find_assignment``); ``--assignment`` overrides.
Every path in the file is relative to the file itself.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from torchgrade.engine.notebooks import SKIP_TAG, NotebookRules

if TYPE_CHECKING:
    from torchgrade.engine.submission_limits import Limit

ASSIGNMENT_FILE = "assignment.yaml"
VISIBILITIES = ("visible", "hidden")


class ConfigError(Exception):
    """The assignment file is wrong; the message says where and how."""


@dataclass(frozen=True)
class Target:
    """One graded name inside an exercise module (a function or a class)."""

    exercise: str
    name: str
    points: float
    time_limit: float
    #: Call patterns the target may not use (see torchgrade.sandbox.forbidden).
    forbidden: tuple[str, ...] = ()

    @property
    def qualname(self) -> str:
        return f"{self.exercise}.{self.name}"


@dataclass(frozen=True)
class Exercise:
    """One student module (`exercises/<name>.py`) and its targets."""

    name: str
    title: str
    visibility: str
    targets: tuple[Target, ...]

    @property
    def points(self) -> float:
        return sum(t.points for t in self.targets)


@dataclass(frozen=True)
class Assignment:
    """The whole assignment: where things are, and what each target is worth."""

    path: Path
    title: str
    reference_dir: Path
    checks_dir: Path
    stubs_dir: Path
    hidden_visibility: str
    exercises: tuple[Exercise, ...]
    #: The course's own probes (a folder of modules; may not exist) and hints (a YAML file; may not exist).
    probes_dir: Path = Path("graders/probes")
    hints_file: Path = Path("graders/hints.yaml")
    #: Whether every stub docstring needs a Chinese summary line (`torchgrade stubs --check`).
    chinese_summaries: bool = False
    #: The weakest isolation level a Gradescope autograder grades at (GRADESCOPE_ISOLATIONS).
    gradescope_isolation: str = "unprivileged-user"
    #: Without CUDA: grade the CUDA checks on the stand-in and count them (score), show their findings
    #: as warnings (warn), or set them aside (off, the default: as before the stand-in). See docs/devices.md.
    cuda_standin: str = "off"
    #: What the course says about notebooks handed in for its modules (docs/notebooks.md).
    notebooks: NotebookRules = NotebookRules()
    #: How many submissions the Gradescope autograder counts per period or due date (None: all of them).
    submission_limit: Limit | None = None
    #: The course's hints {(target or exercise, kind): {lang: text}} and words for its probes' facts.
    hints: dict = field(default_factory=dict, hash=False, compare=False)
    facts: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def root(self) -> Path:
        """The course folder: where assignment.yaml is."""
        return self.path.parent

    @property
    def targets(self) -> tuple[Target, ...]:
        return tuple(t for e in self.exercises for t in e.targets)

    @property
    def max_score(self) -> float:
        return sum(e.points for e in self.exercises)

    def exercise(self, name: str) -> Exercise:
        for e in self.exercises:
            if e.name == name:
                return e
        raise KeyError(name)

    def target(self, exercise: str, name: str) -> Target:
        for t in self.exercise(exercise).targets:
            if t.name == name:
                return t
        raise KeyError(f"{exercise}.{name}")


# Every key the file may use, with its help text (documented in docs/authoring.md, section 10; a test keeps them in sync).
TOP_KEYS = {
    "title": "A title for reports.",
    "reference": "Folder of reference solutions, relative to the file (trusted; never shown to students).",
    "checks": "Folder holding visible/ and hidden/ pytest checks, relative to the file.",
    "stubs": "Folder of student stubs, relative to the file (what `torchgrade check` grades).",
    "probes": "Folder of the course's own probes (scenarios its checks run), relative to the file.",
    "hints": "YAML file of the course's hints for failing checks, relative to the file.",
    "chinese_summaries": "true: every stub docstring needs a Chinese summary line (`torchgrade stubs --check`).",
    "time_limit": "Seconds one check may take, unless an exercise or a target says otherwise.",
    "hidden_visibility": "Gradescope visibility of hidden checks: after_due_date (default) or after_published.",
    "gradescope_isolation": "Weakest sandbox a Gradescope autograder grades in: unprivileged-user (default), bwrap, or process (opt-in).",
    "cuda_standin": "Without CUDA, CUDA checks run on the CUDA stand-in: score (they count, as on a GPU), warn "
                    "(their findings are warnings, no points), off (set aside, the default).",
    "submission_limit": "Gradescope: at most {count: N, per: 24h} counted submissions (per: 30m, 24h, 7d, or "
                        "due_date); over it, the last counted score is kept (docs/exports.md).",
    "exercises": "One entry per student module: title, visibility, time_limit, targets.",
    "notebooks": "Notebooks handed in for the modules: file (one notebook holding every exercise), skip_tag "
                 "(cells left out of grading; default skip-grading). See docs/notebooks.md.",
}
NOTEBOOK_KEYS = {
    "file": "The one notebook (a file name) that holds every exercise; default: each module its own <module>.ipynb.",
    "skip_tag": f"The cell tag that leaves a cell out of grading (default {SKIP_TAG}).",
}
EXERCISE_KEYS = {
    "title": "What the module is about.",
    "visibility": "visible: students run its visible checks; hidden: graded by instructors only.",
    "time_limit": "Seconds per check for this exercise's targets.",
    "forbidden": "Call patterns none of its targets may use (added to each target's own).",
    "targets": "name: points, or name: {points, time_limit, forbidden}.",
}
TARGET_KEYS = {
    "points": "What the target is worth.",
    "time_limit": "Seconds per check for this target.",
    "forbidden": "Call patterns the target may not use: a bare name (view, *pool*) or a dotted one (torch.optim.*).",
}
#: What hidden checks may be on Gradescope. Not `hidden`: Gradescope still adds a hidden test's points to the
#: total the student sees, so resubmitting would read hidden scores off it (hidden checks carry points).
GRADESCOPE_VISIBILITIES = ("after_due_date", "after_published")
#: The weakest isolation `autograde` accepts (see gradescope.py): `process` only where the course opts in.
GRADESCOPE_ISOLATIONS = ("unprivileged-user", "bwrap", "process")


def _where(path: Path, *keys: str) -> str:
    return f"{path.name}: " + ".".join(keys) if keys else path.name


def _check_keys(data: dict, allowed: dict, path: Path, *keys: str) -> None:
    for key in data:
        if key not in allowed:
            near = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else f" (allowed: {', '.join(allowed)})"
            raise ConfigError(f"{_where(path, *keys, str(key))}: unknown key '{key}'{hint}")


def _number(value: Any, path: Path, *keys: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ConfigError(f"{_where(path, *keys)}: expected a number >= {minimum:g}, got {value!r}")
    return float(value)


def _mapping(value: Any, path: Path, *keys: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{_where(path, *keys)}: expected a mapping, got {type(value).__name__}")
    return value


def _patterns(value: Any, path: Path, *keys: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{_where(path, *keys)}: expected a list of call names, got {value!r}")
    return tuple(value)


def exercise_named(name: str) -> str:
    """The exercise a name on the command line is in: `tensors`, `tensors.view`, `tensors.view::test_x`."""
    return name.replace("::", ".").split(".")[0]


def find_assignment(start: str | Path | None = None) -> Path:
    """assignment.yaml in `start` (default: the current folder) or its nearest parent; ConfigError if none."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ASSIGNMENT_FILE).is_file():
            return folder / ASSIGNMENT_FILE
    raise ConfigError(f"no {ASSIGNMENT_FILE} in {here} or any folder above it: run torchgrade inside a course "
                      f"folder, name one with --assignment PATH, or start a course with `torchgrade init DIR`")


def load_assignment(path: str | Path | None = None) -> Assignment:
    """Parse and validate an assignment file (default: `find_assignment()`); raise ConfigError naming the bad key."""
    path = Path(path) if path is not None else find_assignment()
    if path.is_dir():
        path = path / ASSIGNMENT_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read assignment file {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path.name}{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    data = _mapping(data, path)
    _check_keys(data, TOP_KEYS, path)
    base = path.resolve().parent
    default_limit = _number(data.get("time_limit", 10), path, "time_limit", minimum=0.1)
    hidden_vis = data.get("hidden_visibility", "after_due_date")
    if hidden_vis not in GRADESCOPE_VISIBILITIES:
        why = (" (Gradescope's `hidden` still counts their points in the total the student sees)"
               if hidden_vis == "hidden" else "")
        raise ConfigError(f"{_where(path, 'hidden_visibility')}: expected one of {', '.join(GRADESCOPE_VISIBILITIES)}, "
                          f"got {hidden_vis!r}{why}")
    gradescope_isolation = data.get("gradescope_isolation", "unprivileged-user")
    if gradescope_isolation not in GRADESCOPE_ISOLATIONS:
        raise ConfigError(f"{_where(path, 'gradescope_isolation')}: expected one of {', '.join(GRADESCOPE_ISOLATIONS)}, "
                          f"got {gradescope_isolation!r}")
    exercises = []
    for ex_name, ex in _mapping(data.get("exercises"), path, "exercises").items():
        ex = _mapping(ex, path, "exercises", ex_name)
        _check_keys(ex, EXERCISE_KEYS, path, "exercises", ex_name)
        visibility = ex.get("visibility", "visible")
        if visibility not in VISIBILITIES:
            raise ConfigError(f"{_where(path, 'exercises', ex_name, 'visibility')}: expected visible or hidden, got {visibility!r}")
        ex_limit = _number(ex.get("time_limit", default_limit), path, "exercises", ex_name, "time_limit", minimum=0.1)
        ex_forbidden = _patterns(ex.get("forbidden", []), path, "exercises", ex_name, "forbidden")
        targets = []
        for t_name, spec in _mapping(ex.get("targets"), path, "exercises", ex_name, "targets").items():
            keys = ("exercises", ex_name, "targets", t_name)
            if not isinstance(spec, dict):
                spec = {"points": spec}
            _check_keys(spec, TARGET_KEYS, path, *keys)
            points = _number(spec.get("points"), path, *keys, "points")
            limit = _number(spec.get("time_limit", ex_limit), path, *keys, "time_limit", minimum=0.1)
            forbidden = ex_forbidden + _patterns(spec.get("forbidden", []), path, *keys, "forbidden")
            targets.append(Target(ex_name, str(t_name), points, limit, forbidden))
        exercises.append(Exercise(ex_name, str(ex.get("title", ex_name)), visibility, tuple(targets)))
    hints_file = base / data.get("hints", "graders/hints.yaml")
    from torchgrade.engine.hints import HintsError, load_course_hints  # (imports torch through compare: not at module level)

    try:
        hints, facts = load_course_hints(hints_file)
    except HintsError as e:
        raise ConfigError(str(e)) from None
    return Assignment(
        path=path.resolve(),
        title=str(data.get("title", "Assignment")),
        reference_dir=base / data.get("reference", "reference"),
        checks_dir=base / data.get("checks", "graders/checks"),
        stubs_dir=base / data.get("stubs", "exercises"),
        hidden_visibility=hidden_vis,
        exercises=tuple(exercises),
        probes_dir=base / data.get("probes", "graders/probes"),
        hints_file=hints_file,
        chinese_summaries=_flag(data.get("chinese_summaries", False), path, "chinese_summaries"),
        gradescope_isolation=gradescope_isolation,
        cuda_standin=_choice(data.get("cuda_standin", "off"), STANDIN_POLICIES, path, "cuda_standin"),
        notebooks=_notebooks(data.get("notebooks", {}), path),
        submission_limit=_limit(data.get("submission_limit"), path),
        hints=hints,
        facts=facts,
    )


STANDIN_POLICIES = ("score", "warn", "off")


def _choice(value: Any, choices: tuple[str, ...], path: Path, *keys: str) -> str:
    if value not in choices:
        raise ConfigError(f"{_where(path, *keys)}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def _flag(value: Any, path: Path, *keys: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{_where(path, *keys)}: expected true or false, got {value!r}")
    return value


def _notebooks(value: Any, path: Path) -> NotebookRules:
    value = _mapping(value or {}, path, "notebooks")
    _check_keys(value, NOTEBOOK_KEYS, path, "notebooks")
    file, tag = value.get("file", ""), value.get("skip_tag", SKIP_TAG)
    if not isinstance(file, str) or (file and (not file.endswith(".ipynb") or "/" in file or "\\" in file)):
        raise ConfigError(f"{_where(path, 'notebooks', 'file')}: expected a notebook's file name such as "
                          f"course.ipynb, got {file!r}")
    if not isinstance(tag, str) or not tag.strip():
        raise ConfigError(f"{_where(path, 'notebooks', 'skip_tag')}: expected a cell tag, got {tag!r}")
    return NotebookRules(file=file, skip_tag=tag.strip())
def _limit(value: Any, path: Path):
    """The course's submission_limit (torchgrade/engine/submission_limits.py), or None."""
    from torchgrade.engine.submission_limits import LimitError, parse

    if value is None:
        return None
    try:
        return parse(value)
    except LimitError as e:
        raise ConfigError(f"{_where(path, 'submission_limit')}: {e}") from None
