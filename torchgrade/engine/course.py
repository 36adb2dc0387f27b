"""A course's authoring mistakes, found before anything is graded: one clear line each.

Grading a course whose checks do not match its assignment file would give wrong maxima (a target
with no checks drops out of the total) or charge students for the author's slip (a probe that does
not exist). So every command that reads a course (check, grade, stubs, bundle, gradescope, audit)
runs the one validation here, ``validate_course``, and refuses, with the file and the line, when:

- the checks folder or its ``visible/`` folder is missing;
- the course's probes folder does not import;
- a check file names an exercise that neither the assignment nor the reference has (a misspelt
  file name; an exercise the course has, with a reference module, but this assignment leaves out
  on purpose is allowed and only noted);
- a check is marked for a target its exercise lacks, or carries no ``@pytest.mark.target``;
- a check asks for a probe (``probe="..."``) that neither the engine nor the course defines;
- the reference lacks an exercise's module, or a module lacks one of its targets;
- the hints file names an exercise, target or check the course does not have;
- a target has no check at all (visible or hidden);
- a check file does not import (``collect=True``: its module is imported, as pytest collects it);
- a check file defines one name twice (two ``def test_x``, at its top level or in one class): Python keeps
  the second, so the first is never run and a hint naming it would be accepted for a check that is gone.

Near misses of exercise, target, check and probe names get a "did you mean". A student bundle
(``bundle.json`` beside its assignment file) has neither reference solutions nor hidden checks: the
rules that need them are left to the course it was built from.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path

from torchgrade.engine.config import Assignment

#: The manifest a student bundle carries (torchgrade/authoring/bundle.py): its course was validated when it was built.
BUNDLE_MANIFEST = "bundle.json"


class CourseError(Exception):
    """The course is wrong (not the student's work); the message names the file and what to fix."""


@dataclass(frozen=True)
class _Check:
    file: Path
    line: int
    name: str
    target: str | None


def did_you_mean(name: str, known, *, quote: str = "'") -> str:
    """`` (did you mean 'x'?)`` for the nearest of `known` to a misspelt `name`, else ""."""
    near = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    return f" (did you mean {quote}{near[0]}{quote}?)" if near else ""


def _target_of(decorators: list[ast.expr]) -> str | None:
    """The name in ``@pytest.mark.target("name")`` among a function's decorators, if any."""
    for decorator in decorators:
        if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) \
                and decorator.func.attr == "target" and decorator.args \
                and isinstance(decorator.args[0], ast.Constant) and isinstance(decorator.args[0].value, str):
            return decorator.args[0].value
    return None


def _parse(file: Path) -> ast.Module:
    try:
        return ast.parse(file.read_text(encoding="utf-8"), str(file))
    except (OSError, UnicodeDecodeError, SyntaxError) as e:
        raise CourseError(f"{file}: cannot be read as Python ({e})") from None


def _defined_twice(file: Path, tree: ast.Module) -> None:
    """CourseError for a name a check file defines twice in one scope (its top level, or one class)."""
    for scope in [tree, *(n for n in tree.body if isinstance(n, ast.ClassDef))]:
        first: dict[str, int] = {}
        for node in scope.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):  # `test_x = ...` after `def test_x` replaces it too
                names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id in first]
            else:
                continue
            for name in names:
                if name in first:
                    where = f"{scope.name}." if isinstance(scope, ast.ClassDef) else ""
                    raise CourseError(f"{file}:{node.lineno}: {where}{name} is defined twice (lines {first[name]} and "
                                      f"{node.lineno}): Python keeps the second, so the first is never run; give "
                                      f"each its own name")
                first[name] = node.lineno


def _read(file: Path) -> tuple[list[_Check], list[tuple[int, str]]]:
    """The checks of one file (name, line, target) and the probes it names (line, probe); CourseError for a
    name it defines twice."""
    tree = _parse(file)
    _defined_twice(file, tree)
    module_target = None
    for node in tree.body:  # pytestmark = pytest.mark.target("name") marks every check of the file
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            module_target = _target_of([node.value])
    defined = [*tree.body, *(n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body)]  # as pytest collects
    checks = [_Check(file, node.lineno, node.name, _target_of(node.decorator_list) or module_target)
              for node in defined
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")]
    probes = [(node.lineno, keyword.value.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
              for keyword in node.keywords if keyword.arg == "probe"
              and isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str)]
    return checks, probes


def _defined_names(tree: ast.Module) -> set[str] | None:
    """The names a module defines at its top level, or None where it cannot be told without running it."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            return None  # names defined conditionally: the import will tell
    return None if "__getattr__" in names else names


def is_bundle(assignment: Assignment) -> bool:
    """Whether this is a student bundle (no reference solutions, no hidden checks by design)."""
    return (assignment.root / BUNDLE_MANIFEST).is_file()


def course_notes(assignment: Assignment) -> list[str]:
    """Lines about the course that are not mistakes: exercises it has but this assignment leaves out.
    (Reads file names only: a parent that never imports torch may ask.)"""
    listed = {e.name for e in assignment.exercises}
    notes = []
    for exercise, files in _check_files(assignment).items():
        if exercise not in listed and (assignment.reference_dir / f"{exercise}.py").is_file():
            notes.append(f"exercise '{exercise}' has checks ({', '.join(f.name for f in files)}) and a reference, "
                         f"but {assignment.path.name} leaves it out: it is not graded")
    return notes


def _check_files(assignment: Assignment) -> dict[str, list[Path]]:
    """{exercise: its check files} over visible/ and hidden/ (where there is one)."""
    found: dict[str, list[Path]] = {}
    for folder in (assignment.checks_dir / "visible", assignment.checks_dir / "hidden"):
        for file in sorted(folder.glob("test_*.py")) if folder.is_dir() else ():
            found.setdefault(file.stem.removeprefix("test_"), []).append(file)
    return found


def validate_course(assignment: Assignment, *, collect: bool = True) -> list[str]:
    """The one validation of a course: raise CourseError, in one line, for its first authoring mistake
    (the module's list); return its notes (`course_notes`). With `collect`, the check files are also
    imported as pytest collects them (it imports torch and the course's checks into this process)."""
    from torchgrade.sandbox.probes import PROBES, ProbeLoadError, load_course

    visible = assignment.checks_dir / "visible"
    if not visible.is_dir():
        raise CourseError(f"{visible}: no such folder; a course's checks live in {assignment.checks_dir.name}/visible/ "
                          f"and {assignment.checks_dir.name}/hidden/ (`checks:` in {assignment.path.name})")
    try:
        load_course(assignment.probes_dir)
    except ProbeLoadError as e:
        raise CourseError(f"the course's probes do not import: {e}") from None
    bundle = is_bundle(assignment)
    exercises = {e.name: e for e in assignment.exercises}
    checked: set[str] = set()
    check_names: set[str] = set()
    for exercise, files in _check_files(assignment).items():
        if exercise not in exercises:
            if (assignment.reference_dir / f"{exercise}.py").is_file():
                continue  # left out on purpose (a note; the plugin deselects its checks)
            raise CourseError(f"{files[0]}: checks for an exercise '{exercise}', which neither {assignment.path.name} "
                              f"nor {assignment.reference_dir.name}/ has{did_you_mean(exercise, exercises)}")
        targets = {t.name for t in exercises[exercise].targets}
        for file in files:
            checks, probes = _read(file)
            for c in checks:
                if c.target is None:
                    raise CourseError(f"{file}:{c.line}: {c.name} has no @pytest.mark.target('name')")
                if c.target not in targets:
                    raise CourseError(f"{file}:{c.line}: {c.name} is marked for target '{c.target}', which exercise "
                                      f"'{exercise}' in {assignment.path.name} does not have"
                                      + (did_you_mean(c.target, targets) or f" (targets: {', '.join(sorted(targets))})"))
                checked.add(f"{exercise}.{c.target}")
                check_names.add(f"{exercise}.{c.target}::{c.name}")
            for line, name in probes:
                if name not in PROBES:
                    raise CourseError(f"{file}:{line}: probe '{name}' does not exist{did_you_mean(name, PROBES)} "
                                      f"(define it with @probe in {assignment.probes_dir}, or use a built-in one: "
                                      f"see docs/probes.md)")
    if not bundle:
        for target in assignment.targets:
            if target.qualname not in checked:
                raise CourseError(f"{assignment.path.name}: target {target.qualname} ({target.points:g} points) has no "
                                  f"check; add one to {assignment.checks_dir.name}/visible/test_{target.exercise}.py "
                                  f"or hidden/test_{target.exercise}.py, or remove the target")
        _check_reference(assignment)
    if not bundle:  # (a bundle's hints file is its course's, validated when the bundle was built)
        _check_hints(assignment, check_names)
    if collect:
        _collect(assignment)
    return course_notes(assignment)


def _check_reference(assignment: Assignment) -> None:
    """Every exercise has a reference module, and it defines every target (read, not run)."""
    folder = assignment.reference_dir
    modules = {p.stem for p in folder.glob("*.py")} if folder.is_dir() else set()
    for exercise in assignment.exercises:
        file = folder / f"{exercise.name}.py"
        if not file.is_file():
            raise CourseError(f"{file}: no such file: exercise '{exercise.name}' has no reference solution"
                              f"{did_you_mean(exercise.name, modules)}")
        defined = _defined_names(_parse(file))
        if defined is None:
            continue
        for target in exercise.targets:
            if target.name not in defined:
                raise CourseError(f"{file}: defines no '{target.name}', a target of exercise '{exercise.name}' in "
                                  f"{assignment.path.name}{did_you_mean(target.name, defined)}")


def _check_hints(assignment: Assignment, check_names: set[str]) -> None:
    """Every hint names an exercise, a target or a check (exercise.target::test_name) of the course: of this
    assignment, or one the course's reference defines that this assignment leaves out."""
    known = {"*"} | {e.name for e in assignment.exercises} | {t.qualname for t in assignment.targets}
    for where, _kind in assignment.hints:
        if where in known or where in check_names:
            continue
        exercise, _, target = where.split("::")[0].partition(".")
        reference = assignment.reference_dir / f"{exercise}.py"
        graded = "::" in where and where.split("::")[0] in known  # a check of a graded target: it must exist
        if reference.is_file() and not graded:
            defined = _defined_names(_parse(reference))
            if not target or defined is None or target in defined:
                continue  # the course has it (its reference defines it); this assignment leaves it out
        raise CourseError(f"{assignment.hints_file}: hints.{where}: the course has no exercise, target or check "
                          f"of that name{did_you_mean(where, known | check_names)}")


def _collect(assignment: Assignment) -> None:
    """Import every check file as grading would (pytest's collection), or CourseError for the first that fails."""
    from torchgrade.engine.grading import GradingError
    from torchgrade.engine.session import CheckSession

    session = CheckSession(assignment, device="cpu", include_hidden=True)
    try:
        session.open()
    except GradingError as e:
        raise CourseError(str(e).splitlines()[0] if str(e) else "the checks could not be collected") from None
    finally:
        session.close()


def check_course(assignment: Assignment, *, include_hidden: bool = True) -> None:
    """`validate_course` without importing the check files (kept for callers of the earlier name)."""
    validate_course(assignment, collect=False)


def target_mistake(assignment: Assignment, targets: tuple[str, ...] | list[str]) -> str | None:
    """Why a TARGET names no exercise, target or check (exercise.target::test_name) of the assignment, or None."""
    known = {e.name for e in assignment.exercises} | {t.qualname for t in assignment.targets}
    for target in targets:
        name, sep, check_name = target.partition("::")
        if name not in known or (sep and not check_name):
            near = did_you_mean(name, known)
            if near:
                return f"unknown exercise or target '{target}'{near}"
            return (f"unknown exercise or target '{target}' (try one of: "
                    f"{', '.join(e.name for e in assignment.exercises)}, an exercise.target such as "
                    f"{assignment.targets[0].qualname}, or the exercise.target::test_name a failure prints)")
    return None
