"""A course's authoring mistakes, found before anything is graded: one clear line each.

Grading a course whose checks do not match its assignment file would give wrong maxima (a target
with no checks drops out of the total) or charge students for the author's slip (a probe that does
not exist). So every command that grades first reads the course's check files (their syntax only,
nothing is run) and refuses, with the file and the line, when:

- the checks folder or its ``visible/`` folder is missing;
(A check file for an exercise the assignment does not list is not graded: an assignment may take a
part of a course's checks. A misspelt file name shows as a target without checks.)
- a check is marked for a target its exercise lacks, or carries no ``@pytest.mark.target``;
- a target has no check at all (visible or hidden);
- a check asks for a probe (``probe="..."``) that neither the engine nor the course defines;
- the course's probes folder does not import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from .config import Assignment


class CourseError(Exception):
    """The course is wrong (not the student's work); the message names the file and what to fix."""


@dataclass(frozen=True)
class _Check:
    file: Path
    line: int
    name: str
    target: str | None


def _target_of(decorators: list[ast.expr]) -> str | None:
    """The name in ``@pytest.mark.target("name")`` among a function's decorators, if any."""
    for decorator in decorators:
        if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) \
                and decorator.func.attr == "target" and decorator.args \
                and isinstance(decorator.args[0], ast.Constant) and isinstance(decorator.args[0].value, str):
            return decorator.args[0].value
    return None


def _read(file: Path) -> tuple[list[_Check], list[tuple[int, str]]]:
    """The checks of one file (name, line, target) and the probes it names (line, probe)."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
    except (OSError, UnicodeDecodeError, SyntaxError) as e:
        raise CourseError(f"{file}: cannot be read as Python ({e})") from None
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


def check_course(assignment: Assignment, *, include_hidden: bool = True) -> None:
    """Raise CourseError for the first authoring mistake in the course's checks (see the module's list)."""
    from .sandbox.probes import PROBES, ProbeLoadError, load_course

    visible = assignment.checks_dir / "visible"
    if not visible.is_dir():
        raise CourseError(f"{visible}: no such folder; a course's checks live in {assignment.checks_dir.name}/visible/ "
                          f"and {assignment.checks_dir.name}/hidden/ (`checks:` in {assignment.path.name})")
    try:
        load_course(assignment.probes_dir)
    except ProbeLoadError as e:
        raise CourseError(f"the course's probes do not import: {e}") from None
    folders = [visible] + ([assignment.checks_dir / "hidden"] if include_hidden else [])
    exercises = {e.name: e for e in assignment.exercises}
    checked: set[str] = set()
    for folder in folders:
        for file in sorted(folder.glob("test_*.py")) if folder.is_dir() else ():
            exercise = file.stem.removeprefix("test_")
            if exercise not in exercises:
                continue  # not graded (the plugin deselects its checks)
            targets = {t.name for t in exercises[exercise].targets}
            checks, probes = _read(file)
            for c in checks:
                if c.target is None:
                    raise CourseError(f"{file}:{c.line}: {c.name} has no @pytest.mark.target('name')")
                if c.target not in targets:
                    raise CourseError(f"{file}:{c.line}: {c.name} is marked for target '{c.target}', which exercise "
                                      f"'{exercise}' in {assignment.path.name} does not have "
                                      f"(targets: {', '.join(sorted(targets))})")
                checked.add(f"{exercise}.{c.target}")
            for line, name in probes:
                if name not in PROBES:
                    raise CourseError(f"{file}:{line}: probe '{name}' does not exist (define it with @probe in "
                                      f"{assignment.probes_dir}, or use a built-in one: see docs/probes.md)")
    if include_hidden:
        for target in assignment.targets:
            if target.qualname not in checked:
                raise CourseError(f"{assignment.path.name}: target {target.qualname} ({target.points:g} points) has no "
                                  f"check; add one to {assignment.checks_dir.name}/visible/test_{target.exercise}.py "
                                  f"or hidden/test_{target.exercise}.py, or remove the target")
