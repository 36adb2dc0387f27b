"""The checks as a catalogue: every target has visible and hidden checks, and no check hides another."""

import ast
from collections import Counter

import pytest

from conftest import ROOT

CHECKS = ROOT / "graders" / "checks"


def check_functions(path):
    """(name, target) for each top-level test function of a check file."""
    tree = ast.parse(path.read_text())
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            targets = [d.args[0].value for d in node.decorator_list
                       if isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "target" and d.args]
            found.append((node.name, targets[0] if targets else None))
    return found


CHECK_FILES = sorted(CHECKS.glob("*/test_*.py"))


@pytest.mark.parametrize("path", CHECK_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_check_is_silently_replaced_by_another_of_the_same_name(path):
    duplicates = [n for n, count in Counter(n for n, _ in check_functions(path)).items() if count > 1]
    assert not duplicates, f"{path.name}: defined twice, so only the last one runs: {duplicates}"


@pytest.mark.parametrize("path", CHECK_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_check_names_a_target_of_its_exercise(path, assignment):
    exercise = path.stem.removeprefix("test_")
    known = {t.name for t in assignment.exercise(exercise).targets}
    for name, target in check_functions(path):
        assert target in known, f"{path.name}::{name} grades {target!r}, not a target of {exercise}"


def test_every_target_has_visible_and_hidden_checks(assignment):
    covered = {kind: {(p.stem.removeprefix("test_"), t) for p in (CHECKS / kind).glob("test_*.py")
                      for _, t in check_functions(p)} for kind in ("visible", "hidden")}
    for target in assignment.targets:
        for kind in ("visible", "hidden"):
            assert (target.exercise, target.name) in covered[kind], f"{target.qualname} has no {kind} check"
