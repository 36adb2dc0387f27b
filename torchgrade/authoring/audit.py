"""`torchgrade audit`: how strong a course's checks are, measured on wrong variants of its reference.

The reference is right by definition, so a check suite is as strong as the mutants of the reference
it catches (torchgrade.authoring.mutants makes them: one small mistake each). Each mutant is a submission
folder, the reference's modules with one of them mutated, graded like a student's (in the sandbox)
by the checks of its own target alone (only that module is graded); the reference side of every check is computed once and reused. Per target it
reports the mutants made, those a visible check kills, those only hidden checks kill, and each
survivor as a one-line diff. A mutant that hangs or crashes is killed (by the time limit, or by
the grading process's death), and the audit goes on.

It also says where the visible checks may not tell the truth:
- a visible check that no mutant fails: what its name claims, nothing measures;
- a visible check whose kills are all caught by another visible check of the same target asking
  the same probes (a strict subset, or the same set; for the same set, the later one): it adds
  nothing that other check does not measure. Either the behaviour its name claims (say "accumulates
  repeated indices") is not exercised by its inputs (the mutant that breaks it then shows up as a
  survivor or a hidden-only kill beside it), or no single mistake breaks that behaviour alone (an
  input left unchanged, where no mutant writes into its input), or it is simply redundant;
- a visible check whose name names what a mutant changes (a word of five letters or more, up to
  its ending: "accumulates" for ``accumulate=True`` made ``False``), passed by that mutant while
  another check kills it. Changed defaults, exception names and message text do not count.
A program cannot read names for what they promise, so these two lists are for the author to look
through; they do not make the audit fail, where a survivor or a check no mutant fails does. Checks that ask different
  probes (values, gradients, the input left unchanged) measure different things and are not compared.

A check whose reference raises what it does not expect measures nothing: it is listed under its target
with the device and the error, and its verdicts are left out (the audit is not clean). Per target the
audit also lists what no check exercises (torchgrade/authoring/coverage.py): the reference's lines no check runs,
the loops no check runs twice, the lines no mutant changes; for the author to look through.

An author marks the mutants that no check can tell apart from the reference (equivalent mutants)
in ``equivalent-mutants.yaml`` beside the checks folder (graders/ in the bundled course), each with a
one-line reason; they do not count. An entry that matches no mutant gets a note.

"Verified" is the audit's claim, not the mark's: the mutant and the reference behave the same on every
input its search tries (torchgrade/authoring/verification.py), the mark's own ``input:`` (a call of the
target, evaluated on both sides) and its variations first. A mark with ``outside_contract:`` (the
docstring's sentence, word for word) also has ``excludes:``, an expression over the target's parameters
that is true for the inputs that sentence puts outside; it is verified only where every difference the
search finds is one of those, and is counted apart ("outside the contract, verified"). A mark that a
check kills, or that a search input tells apart, is overturned: counted, the audit not clean, with the
check or the input that refutes it.
"""

from __future__ import annotations

import ast
import dataclasses
import keyword
import os
import random
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from torchgrade.engine.config import Assignment, Target, load_assignment
from torchgrade.authoring.coverage import Coverage, coverage_lines, load_ran, save_ran, target_coverage
from torchgrade.engine.grading import GradingError
from torchgrade.authoring.mutants import Mutant, make_mutants

#: The file of equivalent mutants, beside the course's checks folder.
EQUIVALENT_FILE = "equivalent-mutants.yaml"
#: A mutant's checks may take this many times the reference's slowest check of the target (at least
#: MIN_LIMIT seconds, at most the target's own time limit): a mutant that loops for ever costs seconds.
LIMIT_FACTOR = 10.0
MIN_LIMIT = 3.0
KILLING = ("failed", "error")


class AuditError(Exception):
    """The audit cannot run (a reference that fails its own checks, a target without a reference): one line."""


# --- in the grading process (this one, or a pool's worker) ---

def _with_time_limit(assignment: Assignment, qualname: str, seconds: float) -> Assignment:
    exercises = tuple(dataclasses.replace(e, targets=tuple(
        dataclasses.replace(t, time_limit=seconds) if t.qualname == qualname else t for t in e.targets))
        for e in assignment.exercises)
    return dataclasses.replace(assignment, exercises=exercises)


@dataclass(frozen=True)
class AuditJob:
    """Grades one mutant folder (a Submission named ``exercise.target@id``) with its target's checks alone;
    picklable, for torchgrade.classroom.executors."""

    assignment_path: str
    device: str = "all"
    limits: tuple[tuple[str, float], ...] = ()
    #: Where a pool's workers share the reference side of each target's checks (torchgrade.classroom.batch).
    recording_dir: str | None = None
    #: Where the reference's round writes the requests its checks sent (``<target>.req``), for verification.
    requests_dir: str | None = None

    def __call__(self, submission):
        from torchgrade.classroom import batch
        from torchgrade.engine import plugin, session as session_module
        from torchgrade.engine.scoring import Grade

        qualname, _, ident = submission.name.partition("@")
        only = (qualname,)
        assignment = load_assignment(self.assignment_path)
        with batch._lock:
            if self.recording_dir:
                batch.share_reference(Path(self.recording_dir) / f"{qualname}.rec", assignment, self.device, only)
            session = session_module.shared(assignment, self.device, only)
            session.open()
            limit = dict(self.limits).get(qualname)
            state = session._config.stash[plugin._state_key]
            if limit is not None and state.assignment.target(*qualname.split(".")).time_limit != limit:
                # every later round of this session reuses its state's assignment (plugin.pytest_configure)
                state.assignment = _with_time_limit(state.assignment, qualname, limit)
            try:
                if ident == "reference":  # every check: each must pass
                    from torchgrade.engine import differential
                    from torchgrade.sandbox import wire

                    differential.captured, differential.covered = [], {}
                    try:
                        grade = session.grade(submission.source)
                    finally:
                        sent, differential.captured = differential.captured, None
                        ran, differential.covered = differential.covered, None
                    if self.requests_dir:
                        frames = [frame for name, frame in sent if name == qualname]
                        (Path(self.requests_dir) / f"{qualname}.req").write_bytes(wire.encode(frames))
                        save_ran(Path(self.requests_dir) / f"{qualname}.lines", ran.get(qualname))
                    return grade
                # The visible checks, all of them (their kill sets are compared); the hidden ones only
                # where no visible check kills the mutant (whether one does is all that is reported).
                grade = session.grade(submission.source, select=lambda item: plugin.visibility(item) == "visible")
                if not any(t.status in KILLING for t in grade.tests):
                    hidden = session.grade(submission.source, select=lambda item: plugin.visibility(item) == "hidden")
                    grade = Grade(grade.submission, grade.tests + hidden.tests)
                return grade
            except GradingError:
                raise
            except Exception as e:  # the grader, not the mutant (which runs in the sandbox): stop, saying so
                session_module.forget(assignment, self.device, only)
                raise GradingError(f"grading {submission.name} failed: {type(e).__name__}: {e}") from None


# --- the audit, in the process that runs the command ---

@dataclass
class CheckInfo:
    key: str  # file::function, devices and parameters folded in
    name: str  # as reports show it: exercise.target: words
    visibility: str
    probes: frozenset[str]
    kills: set[str] = field(default_factory=set)  # mutant ids


@dataclass
class MutantResult:
    mutant: Mutant
    verdict: str  # visible | hidden | crashed | survived | equivalent | needs_cuda
    killed_by: list[str] = field(default_factory=list)  # check names
    how: str = ""  # "time limit" where a check ran out of time, "crashed" where the sandbox process died
    reason: str = ""  # an equivalent mutant's, or why a needs_cuda one needs more CUDA devices than were graded
    #: A marked mutant's verification (torchgrade/authoring/verification.py): verified | outside the contract |
    #: unverified | overturned (a check kills it, or the search found an input that tells it apart: a survivor)
    mark: str = ""
    evidence: str = ""  # the input that shows a difference, or why the search could not run

    def as_dict(self) -> dict:
        m = self.mutant
        return {"id": m.id, "operator": m.operator, "file": m.file, "line": m.line, "before": m.before,
                "after": m.after, "diff": m.diff, "verdict": self.verdict, "killed_by": self.killed_by,
                "how": self.how, "reason": self.reason, "mark": self.mark, "evidence": self.evidence}


@dataclass
class TargetAudit:
    qualname: str
    made: int  # mutants the operators make
    results: list[MutantResult]
    checks: list[CheckInfo]
    unmeasured: list[str] = field(default_factory=list)  # visible checks no mutant fails
    subsumed: list[tuple[str, str]] = field(default_factory=list)  # (check, the check that catches all it does)
    #: (check, the word its name shares with the mutated line, a mutant another check kills but it does not)
    named_misses: list[tuple[str, str, MutantResult]] = field(default_factory=list)
    #: The reference's lines no check runs and no mutant changes (torchgrade/authoring/coverage.py)
    coverage: Coverage | None = None
    #: Checks whose reference raises what they do not expect (torchgrade.engine.differential.measures_nothing): the
    #: course's mistake, with the device and the error; their verdicts are left out of every count
    measures_nothing: list[str] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.results if r.verdict == verdict)

    @property
    def figures(self) -> dict:
        marks = [r.mark for r in self.results]
        return {"made": self.made, "graded": len(self.results), "killed_visible": self.count("visible"),
                "killed_hidden_only": self.count("hidden"), "killed_crashed": self.count("crashed"),
                "survived": self.count("survived"), "equivalent": self.count("equivalent"),
                "needs_cuda": self.count("needs_cuda"),
                "marks_verified": marks.count("verified"), "marks_outside_contract": marks.count("outside the contract"),
                "marks_unverified": marks.count("unverified"), "marks_overturned": marks.count("overturned")}

    @property
    def survivors(self) -> list[MutantResult]:
        return [r for r in self.results if r.verdict == "survived"]

    def as_dict(self) -> dict:
        return {"target": self.qualname, **self.figures,
                "mutants": [r.as_dict() for r in self.results],
                "visible_checks_no_mutant_fails": self.unmeasured,
                "visible_checks_adding_nothing": [{"check": c, "covered_by": o} for c, o in self.subsumed],
                "visible_checks_passing_what_their_name_names": [
                    {"check": c, "word": w, "mutant": r.mutant.id, "diff": r.mutant.diff, "killed_by": r.killed_by}
                    for c, w, r in self.named_misses],
                "coverage": self.coverage.as_dict() if self.coverage is not None else None,
                "checks_that_measure_nothing": self.measures_nothing}


@dataclass
class Audit:
    title: str
    targets: list[TargetAudit]
    seed: int
    max_per_target: int | None
    seconds: float
    notes: list[str]
    #: Every target of the course, in its order (the page keeps other targets' sections from earlier runs)
    course: tuple[str, ...] = ()

    @property
    def totals(self) -> dict:
        keys = ("made", "graded", "killed_visible", "killed_hidden_only", "killed_crashed", "survived", "equivalent",
                "needs_cuda", "marks_verified", "marks_outside_contract", "marks_unverified", "marks_overturned")
        return {k: sum(t.figures[k] for t in self.targets) for k in keys}

    @property
    def score(self) -> float | None:
        """The share of graded, non-equivalent mutants that some check kills (those that need more CUDA
        devices than were graded are not counted: they were not measured)."""
        total = self.totals
        counted = total["graded"] - total["equivalent"] - total["needs_cuda"]
        return None if not counted else (counted - total["survived"]) / counted

    @property
    def clean(self) -> bool:
        """No survivor, every mark verified (none overturned), no visible check that no mutant fails and no check whose reference
        raises what it does not expect (the checks adding nothing, and the lines no check runs or no mutant
        changes, are for the author to look through: see the module's docstring and torchgrade/authoring/coverage.py)."""
        return all(not t.survivors and not t.unmeasured and not t.figures["marks_unverified"]
                   and not t.figures["marks_overturned"] and not t.measures_nothing for t in self.targets)

    def as_dict(self) -> dict:
        return {"title": self.title, "seed": self.seed, "max_per_target": self.max_per_target,
                "seconds": round(self.seconds, 2), "totals": self.totals, "score": self.score, "clean": self.clean,
                "notes": self.notes, "targets": [t.as_dict() for t in self.targets]}


def select_targets(assignment: Assignment, names: tuple[str, ...]) -> list[Target]:
    """The targets named (exercises or exercise.target), in assignment order; all when none are."""
    if not names:
        return list(assignment.targets)
    return [t for t in assignment.targets if any(n in (t.exercise, t.qualname) for n in names)]


def load_equivalents(assignment: Assignment) -> tuple[dict[str, list[dict]], Path]:
    """{exercise.target: [{mutant, reason[, needs_cuda_devices]}]} from the course's equivalent-mutants file
    (none: {}). An entry with ``needs_cuda_devices: N`` is a mutant only N CUDA devices can tell apart: it
    is set aside as "needs_cuda" where fewer are graded, and graded as any other where N are."""
    path = assignment.checks_dir.parent / EQUIVALENT_FILE
    if not path.is_file():
        return {}, path
    try:
        # every scalar as text: an id such as 52820313 or 8e1e2587 is not a number
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader) or {}
    except (OSError, yaml.YAMLError) as e:
        raise AuditError(f"{path}: cannot be read as YAML ({' '.join(str(e).split())})") from None
    if not isinstance(data, dict):
        raise AuditError(f"{path}: expected a mapping of exercise.target to a list of {{mutant, reason}}")
    for target, entries in data.items():
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and set(e) - {"needs_cuda_devices", "outside_contract", "input", "excludes"}
                == {"mutant", "reason"}
                and isinstance(e["mutant"], str) and isinstance(e["reason"], str) and e["reason"].strip()
                and str(e.get("needs_cuda_devices", "1")).isdigit()
                and ("outside_contract" in e) == ("excludes" in e) and ("outside_contract" not in e or "input" in e)
                and all(isinstance(e.get(k, "x"), str) and e.get(k, "x").strip()
                        for k in ("outside_contract", "input", "excludes"))
                for e in entries):
            raise AuditError(f"{path}: {target}: expected a list of entries, each with `mutant:` (its id, or its "
                             f"change as `before  →  after`), a one-line `reason:`, optionally `input:` (a call of "
                             f"the target that the search runs first) and, for a mutant that only CUDA devices can "
                             f"tell apart, `needs_cuda_devices:` (how many); a mutant that differs only outside the "
                             f"contract has `input:` (a call that shows it), `outside_contract:` (the docstring's "
                             f"sentence that puts that input outside) and `excludes:` (an expression over the "
                             f"target's parameters, true for the inputs that sentence excludes)")
        from torchgrade.authoring.verification import parse_input

        name = target.rpartition(".")[2]
        for e in entries:
            try:
                if "input" in e:
                    parse_input(e["input"], name)
                if "excludes" in e:
                    compile(" ".join(e["excludes"].split()), "<excludes>", "eval")
            except (ValueError, SyntaxError) as error:
                which = "excludes" if isinstance(error, SyntaxError) else "input"
                raise AuditError(f"{path}: {target}: {e['mutant']}: `{which}:` {error}") from None
    return data, path


def _matches(entry: dict, mutant: Mutant) -> bool:
    text = " ".join(entry["mutant"].split())
    return text in (mutant.id, " ".join(f"{mutant.before}  →  {mutant.after}".split()), " ".join(mutant.diff.split()))


def _check_probes(assignment: Assignment) -> dict[str, frozenset[str]]:
    """{file::function: the probes its calls ask for} for every check file (``call`` where none is named)."""
    found: dict[str, frozenset[str]] = {}
    for file in sorted(assignment.checks_dir.glob("*/test_*.py")):
        try:
            tree = ast.parse(file.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                probes = {k.value.value for c in ast.walk(node) if isinstance(c, ast.Call) for k in c.keywords
                          if k.arg == "probe" and isinstance(k.value, ast.Constant)}
                rel = file.relative_to(assignment.checks_dir).as_posix()
                found[f"{rel}::{node.name}"] = frozenset(str(p) for p in probes) or frozenset({"call"})
    return found


def _key(nodeid: str) -> str:
    """A check's function (file::name), its devices and parameters folded in."""
    path, _, rest = nodeid.partition("::")
    return f"{path}::{rest.split('[')[0].split('::')[-1]}"


def _name(result) -> str:
    key = _key(result.nodeid)
    return f"{result.exercise}.{result.target}: {key.split('::')[-1].removeprefix('test_').replace('_', ' ')}"


def _how(output: str) -> str:
    """How a check killed a mutant, where it was not by a wrong value: its time limit, or the process's death."""
    if "the time limit of one check" in output:
        return "time limit"
    if "the sandbox process" in output and "ended the sandbox" not in output or "ended the sandbox process" in output:
        return "crashed"
    return ""


def run_audit(assignment: Assignment, names: tuple[str, ...] = (), *, seed: int = 0,
              max_per_target: int | None = None, jobs: int = 1, device: str = "all",
              progress: Callable[[str], None] | None = None) -> Audit:
    """Audit the checks of the named targets (all when none are named); AuditError if it cannot."""
    from torchgrade.classroom.executors import Crashed, make_executor
    from torchgrade.classroom.submissions import Submission

    started = time.perf_counter()
    say = progress or (lambda text: None)
    equivalents, equivalent_path = load_equivalents(assignment)
    targets = select_targets(assignment, names)
    import torch

    cuda_devices = torch.cuda.device_count() if device != "cpu" and torch.cuda.is_available() else 0
    plan: list[tuple[Target, list[Mutant], int]] = []
    every: dict[str, list[Mutant]] = {}  # each target's mutants, before a sample is taken (what lines they change)
    for target in targets:
        path = assignment.reference_dir / f"{target.exercise}.py"
        if not path.is_file():
            raise AuditError(f"no reference for {target.qualname}: {path} does not exist (nothing to make mutants of)")
        try:
            mutants = make_mutants(path, target.exercise, target.name)
        except KeyError:
            raise AuditError(f"no reference for {target.qualname}: {path} does not define {target.name}") from None
        except SyntaxError as e:
            raise AuditError(f"{path}:{e.lineno}: the reference does not parse ({e.msg})") from None
        made = len(mutants)
        every[target.qualname] = mutants
        if max_per_target is not None and made > max_per_target:
            chosen = set(m.id for m in random.Random(f"{seed}\0{target.qualname}").sample(mutants, max_per_target))
            mutants = [m for m in mutants if m.id in chosen]
        plan.append((target, mutants, made))
    notes = []
    known_targets = {t.qualname for t in assignment.targets}
    for qualname, entries in equivalents.items():
        if qualname not in known_targets:
            notes.append(f"{equivalent_path.name}: {qualname} is not a target of this course (a stale entry?)")
    everything = {t.qualname: make_mutants(assignment.reference_dir / f"{t.exercise}.py", t.exercise, t.name)
                  for t, _, _ in plan if t.qualname in equivalents}
    ambiguous: list[dict] = []
    for qualname, entries in equivalents.items():
        for entry in entries if qualname in everything else ():
            matching = [m.id for m in everything[qualname] if _matches(entry, m)]
            if not matching:
                notes.append(f"{equivalent_path.name}: {qualname}: no mutant matches {entry['mutant']!r} "
                             f"(the reference changed? remove or update the entry)")
            elif len(matching) > 1:  # it marks none of them: which one it means is not said
                ambiguous.append(entry)
                notes.append(f"{equivalent_path.name}: {qualname}: {entry['mutant']!r} matches {len(matching)} "
                             f"mutants ({', '.join(matching)}): name each by its id")

    executor = make_executor("local", jobs)
    work = Path(tempfile.mkdtemp(prefix="torchgrade-audit-"))
    try:
        recording_dir = str(work / "recordings") if jobs > 1 else None
        if recording_dir:
            Path(recording_dir).mkdir()
        requests_dir = work / "requests"
        requests_dir.mkdir()
        # 1. the reference, by each target's checks: every check must pass, or there is nothing to measure (a
        # check that measures nothing is reported, and left out of the counts); the lines they run are noted
        job = AuditJob(str(assignment.path), device, (), recording_dir, str(requests_dir))
        references = [Submission(f"{t.qualname}@reference", assignment.reference_dir) for t, _, _ in plan]
        limits = {}
        nothing: dict[str, dict[str, str]] = {}  # target -> {check whose reference raises what it does not expect: why}
        say(f"grading the reference ({len(references)} target(s))")
        for submission, grade in executor.run(job, references):
            if isinstance(grade, Crashed):
                raise AuditError(f"grading the reference of {submission.name.split('@')[0]} crashed: {grade.why}")
            qualname = submission.name.split("@")[0]
            for t in grade.tests:
                if t.status in KILLING:
                    first = (t.output.strip().splitlines() or [t.status])[0]
                    if "it measures nothing" in first:  # a course mistake the audit reports, and measures around
                        where = f" [{t.nodeid.split('[')[-1].rstrip(']')}]" if "[" in t.nodeid else ""
                        nothing.setdefault(qualname, {})[t.nodeid] = \
                            f"{_name(t)}{where}: {first[max(0, first.find('the reference raises')):]}"
                        continue
                    raise AuditError(f"the reference fails its own check {t.nodeid} ({_name(t)}): {first}; "
                                     f"nothing to measure the checks against")
            target = next(t for t, _, _ in plan if t.qualname == qualname)
            slowest = max((t.duration for t in grade.tests), default=0.0)
            limits[qualname] = min(target.time_limit, max(MIN_LIMIT, LIMIT_FACTOR * slowest))
        # 2. the mutants, each in a folder of its own: the reference's modules with one of them mutated (a
        # probe may import a module of the submission other than the one it grades)
        modules = {p.name: p.read_bytes() for p in assignment.reference_dir.glob("*.py")}
        submissions, by_name = [], {}
        for target, mutants, _ in plan:
            for m in mutants:
                folder = work / target.qualname / m.id
                folder.mkdir(parents=True)
                for name, content in modules.items():
                    (folder / name).write_bytes(content)
                (folder / f"{target.exercise}.py").write_text(m.source, encoding="utf-8")
                name = f"{target.qualname}@{m.id}"
                submissions.append(Submission(name, folder))
                by_name[name] = m
        job = AuditJob(str(assignment.path), device, tuple(sorted(limits.items())), recording_dir)
        probes = _check_probes(assignment)
        checks: dict[str, dict[str, CheckInfo]] = {t.qualname: {} for t, _, _ in plan}
        results: dict[str, MutantResult] = {}
        say(f"grading {len(submissions)} mutant(s)")
        done = 0
        for submission, grade in executor.run(job, submissions):
            mutant = by_name[submission.name]
            done += 1
            if done % 10 == 0 or done == len(submissions):
                say(f"{done} / {len(submissions)} mutants graded")
            if isinstance(grade, Crashed):
                results[mutant.id + mutant.target] = MutantResult(mutant, "crashed", how=grade.why)
                continue
            visible, hidden, how = [], [], ""
            for t in grade.tests:
                if t.nodeid in nothing.get(mutant.target, {}):
                    continue  # it fails every mutant as it fails the reference: no kill of its counts
                info = checks[mutant.target].setdefault(_key(t.nodeid), CheckInfo(
                    _key(t.nodeid), _name(t), t.visibility, probes.get(_key(t.nodeid), frozenset({"call"}))))
                if t.status in KILLING:
                    info.kills.add(mutant.id)
                    (visible if t.visibility == "visible" else hidden).append(info.name)
                    how = how or _how(t.output)
            verdict = "visible" if visible else "hidden" if hidden else "survived"
            results[mutant.id + mutant.target] = MutantResult(
                mutant, verdict, sorted(set(visible or hidden)), how)
        # 3. each marked survivor, against the reference, by the audit's own search (torchgrade/authoring/verification.py)
        marked: dict[str, list[tuple[str, str]]] = {}
        for target, mutants, _ in plan:
            for m in mutants:
                entry = _entry(equivalents, ambiguous, target.qualname, m)
                if entry is not None and "needs_cuda_devices" not in entry \
                        and results[m.id + m.target].verdict == "survived":
                    marked.setdefault(target.qualname, []).append(
                        (m.id, str(work / target.qualname / m.id / f"{target.exercise}.py"), entry))
        verdicts = {}
        if marked:
            from torchgrade.authoring.verification import verify

            verdicts = verify(assignment, marked, requests_dir, work, seed, say)
        ran = {t.qualname: load_ran(requests_dir / f"{t.qualname}.lines") for t, _, _ in plan}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    audits = []
    for target, mutants, made in plan:
        rows = [results[m.id + m.target] for m in mutants]
        for row in rows:
            entry = _entry(equivalents, ambiguous, target.qualname, row.mutant)
            needs = int(entry.get("needs_cuda_devices", 0)) if entry is not None else 0
            if needs and cuda_devices >= needs:
                entry = None  # measurable here: graded as any other mutant
            elif needs:
                if row.verdict == "survived":
                    row.verdict, row.reason = "needs_cuda", " ".join(entry["reason"].split())
                else:
                    notes.append(f"{equivalent_path.name}: {target.qualname}: {row.mutant.id} is marked as needing "
                                 f"{needs} CUDA device(s) but {', '.join(row.killed_by) or 'a check'} kills it here")
                continue
            if entry is not None:
                if row.verdict != "survived":  # a check tells it apart: the mark is false
                    row.mark = "overturned"
                    row.evidence = (f"marked equivalent, but {', '.join(row.killed_by) or 'a check'} kills it"
                                    + (f" ({row.how})" if row.how else ""))
                else:
                    _judge_mark(row, entry, verdicts.get((target.qualname, row.mutant.id)),
                                assignment.reference_dir / f"{target.exercise}.py", target.name)
        audit = TargetAudit(target.qualname, made, rows, list(checks[target.qualname].values()))
        audit.measures_nothing = sorted(nothing.get(target.qualname, {}).values())
        audit.coverage = target_coverage(assignment.reference_dir / f"{target.exercise}.py", target.name,
                                         ran[target.qualname], every[target.qualname])
        _judge_checks(audit)
        audits.append(audit)
    return Audit(assignment.title, audits, seed, max_per_target, time.perf_counter() - started, notes,
                 tuple(t.qualname for t in assignment.targets))


def _entry(equivalents: dict, ambiguous: list[dict], qualname: str, mutant: Mutant) -> dict | None:
    """The mark of a mutant, if one names it (an entry that matches several mutants marks none)."""
    return next((e for e in equivalents.get(qualname, ()) if _matches(e, mutant) and e not in ambiguous), None)


def _docstring(path: Path, name: str) -> str:
    """The target's docstring in the reference (its class's and its methods' for a class), words joined by one space."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return ""
    node = next((n for n in tree.body if getattr(n, "name", None) == name), None)
    texts = [ast.get_docstring(n) or "" for n in ([node] + [m for m in getattr(node, "body", [])
                                                          if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                                                   if node is not None else [])]
    return " ".join(" ".join(texts).split())


def _judge_mark(row: MutantResult, entry: dict, verdict, reference: Path, name: str) -> None:
    """A marked survivor: equivalent only where the search verified it (or found a difference only outside
    the contract, on the input the mark names, by a sentence the docstring has); a survivor where it found
    an input that tells it apart; equivalent but unverified where the search could not run."""
    reason = " ".join(entry["reason"].split())
    if verdict is None or verdict.status == "unverified":
        row.verdict, row.reason, row.mark = "equivalent", reason, "unverified"
        row.evidence = verdict.evidence if verdict is not None else "the search did not run"
    elif verdict.status == "verified" and "outside_contract" in entry:
        sentence = " ".join(entry["outside_contract"].split())
        if sentence and sentence in _docstring(reference, name):
            row.verdict, row.reason, row.mark = "equivalent", reason, "outside the contract"
            row.evidence = (f"{verdict.outside} difference(s) on {verdict.inputs} input(s), each outside the contract "
                            f"(excludes: {' '.join(entry['excludes'].split())}; \"{sentence}\")"
                            + (f"; the first: {verdict.evidence}" if verdict.evidence else ""))
        else:
            row.mark, row.evidence = "overturned", (f"the mark's sentence \"{sentence}\" is not in {name}'s docstring: "
                                                    f"nothing puts its inputs outside the contract")
    elif verdict.status == "verified":
        row.verdict, row.reason, row.mark = "equivalent", reason, "verified"
        row.evidence = f"no difference on {verdict.inputs} input(s)"
    else:
        row.mark, row.evidence = "overturned", verdict.evidence


#: Words of check names that say nothing about one behaviour of the code.
_PLAIN_WORDS = {"matches", "returns", "raises", "torch", "tensor", "tensors", "input", "inputs", "along", "shape",
                "keeps", "gives", "every", "other", "python", "notes", "example", "examples", "their", "where",
                "value", "values", "error", "within", "leaves", "after", "works", "passes", "while", "given",
                "without", "number", "numbers", "result", "first", "second", "float", "float32", "float64",
                "check", "checks", "random", "small", "large", "which", "there", "shapes", "dimension",
                "dimensions", "runtime"}


def _words(text: str) -> set[str]:
    """Lower-case words of five letters or more (identifiers split at _ and at capitals)."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return {w.lower() for w in re.findall(r"[A-Za-z]{5,}", text.replace("_", " "))} - _PLAIN_WORDS


def _changed_words(before: str, after: str) -> set[str]:
    """The words of what a mutant changed on its line, with the keyword it is the value of
    (``accumulate=True`` made ``False``: "accumulate"); exception names left out."""
    start = len(os.path.commonprefix([before, after]))
    end = len(os.path.commonprefix([before[start:][::-1], after[start:][::-1]]))
    while start and (before[start - 1].isalnum() or before[start - 1] == "_"):
        start -= 1  # whole identifiers
    changed = before[start:len(before) - end] + " " + after[start:len(after) - end]
    named = re.search(r"(\w+)\s*=\s*$", before[:start])
    if named:
        changed += " " + named.group(1)
    changed = re.sub(r"\b\w*(Error|Exception|Warning)\b", " ", changed)
    changed = re.sub(r"[rbuf]*(['\"]).*?\1", " ", changed)  # what a message says is not what the code does
    return {w for w in _words(changed) if not keyword.iskeyword(w)}


def _shared_stem(name_words: set[str], code_words: set[str]) -> str | None:
    """A word of a check's name that is, up to its ending, a word of the code ("accumulates", "accumulate")."""
    for a in sorted(name_words):
        for b in code_words:
            stem = os.path.commonprefix([a, b])
            if len(stem) >= 5 and len(stem) >= min(len(a), len(b)) - 2:
                return a
    return None


def _judge_checks(audit: TargetAudit) -> None:
    """The visible checks that measure nothing, and those that add nothing over another (module docstring)."""
    visible = [c for c in audit.checks if c.visibility == "visible"]
    if not audit.results:
        return
    audit.unmeasured = [c.name for c in visible if not c.kills]
    for i, c in enumerate(visible):
        if not c.kills:
            continue
        for j, other in enumerate(visible):
            if other is c or other.probes != c.probes:
                continue
            # a strict subset; for the same set, the later check in file order is the one that adds nothing
            if c.kills < other.kills or (c.kills == other.kills and j < i):
                audit.subsumed.append((c.name, other.name))
                break
    # A check whose name names what a mutant changes, passed by that mutant while another check kills it:
    # "accumulates repeated indices", passed by `accumulate=True` made `False` (its indices never repeat).
    for c in visible:
        words = _words(c.name.partition(": ")[2])
        for r in audit.results:
            # (a changed default: a check that names the parameter usually passes it, as it should)
            if r.verdict in ("visible", "hidden") and c.name not in r.killed_by and r.mutant.operator != "default":
                word = _shared_stem(words, _changed_words(r.mutant.before, r.mutant.after))
                if word:
                    audit.named_misses.append((c.name, word, r))
                    break


# --- output ---

def lines(audit: Audit) -> list[str]:
    """The audit as terminal lines."""
    out = []
    for t in audit.targets:
        f = t.figures
        sampled = f" (of {f['made']})" if f["graded"] != f["made"] else ""
        out.append(f"{t.qualname}: {f['graded']} mutants{sampled}: {f['killed_visible']} killed by a visible check, "
                   f"{f['killed_hidden_only']} only by hidden checks, {f['killed_crashed']} crashed, "
                   f"{f['survived']} survived, {f['equivalent']} equivalent"
                   + (f", {f['needs_cuda']} need more CUDA devices than graded here" if f["needs_cuda"] else ""))
        if f["marks_verified"] + f["marks_outside_contract"] + f["marks_unverified"] + f["marks_overturned"]:
            out.append(f"  marks: {f['marks_verified']} verified, {f['marks_outside_contract']} outside the contract, "
                       f"verified, {f['marks_unverified']} unverified, {f['marks_overturned']} overturned")
        for r in t.results:
            if r.verdict == "survived":
                out.append(f"  survived {r.mutant.id}  {r.mutant.diff}")
                if r.mark == "overturned":
                    out.append(f"    marked equivalent, but the audit's search tells it apart: {r.evidence}")
        for r in t.results:
            if r.mark == "overturned" and r.verdict != "survived":
                out.append(f"  overturned mark {r.mutant.id}  {r.mutant.diff}: {r.evidence}")
        for r in t.results:
            if r.mark == "unverified":
                out.append(f"  unverified mark {r.mutant.id}  {r.mutant.diff}  ({r.evidence})")
        for r in t.results:
            if r.verdict == "needs_cuda":
                out.append(f"  needs CUDA {r.mutant.id}  {r.mutant.diff}  ({r.reason})")
        for r in t.results:
            if r.verdict == "hidden":
                out.append(f"  hidden only {r.mutant.id}  {r.mutant.diff}")
        out.extend(f"  check that measures nothing: {text}" for text in t.measures_nothing)
        out.extend(coverage_lines(t.coverage))
        for name in t.unmeasured:
            out.append(f"  visible check no mutant fails: {name}")
        for name, other in t.subsumed:
            out.append(f"  look at: visible check adding nothing: {name} (each mutant it kills, {other} kills too: "
                       f"do its inputs exercise what its name claims?)")
        for name, word, r in t.named_misses:
            out.append(f"  look at: visible check {name} names '{word}', yet passes {r.mutant.id}  {r.mutant.diff} "
                       f"(killed by {', '.join(r.killed_by)})")
    out.extend(f"note: {n}" for n in audit.notes)
    if any(t.figures["graded"] < t.figures["made"] for t in audit.targets):
        out.append("note: a sample of the mutants was graded (--max-per-target): a check listed above may kill a "
                   "mutant left out; audit without it before changing a check")
    total = audit.totals
    score = audit.score
    out.append(f"{total['graded']} mutants graded in {audit.seconds:.1f} s: {total['killed_visible']} killed by a visible "
               f"check, {total['killed_hidden_only']} only by hidden checks, {total['killed_crashed']} crashed, "
               f"{total['survived']} survived, {total['equivalent']} equivalent"
               + (f", {total['needs_cuda']} need more CUDA devices than graded here" if total["needs_cuda"] else "")
               + (f"; {score:.0%} of the non-equivalent ones killed" if score is not None else ""))
    marks = total["marks_verified"] + total["marks_outside_contract"] + total["marks_unverified"] + total["marks_overturned"]
    if marks:
        out.append(f"{marks} equivalence mark(s) tried: {total['marks_verified']} verified, "
                   f"{total['marks_outside_contract']} outside the contract, verified, {total['marks_unverified']} "
                   f"unverified, {total['marks_overturned']} overturned")
    return out

