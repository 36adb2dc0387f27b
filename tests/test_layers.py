"""The package's wings and the one direction its imports go (docs/how-it-works.md, pyproject.toml's contracts).

`lint-imports` (in .ci/run) keeps the layers and the folders acyclic; these tests say what its contracts
do not: no circle between any two modules anywhere (a package's __init__ and its own modules included),
and the imports that no static reading sees (`importlib.import_module`) are the three known ones, each
checked here.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import torchgrade
from torchgrade.base.moved import MOVED

PACKAGE = Path(torchgrade.__file__).parent
ROOT = PACKAGE.parent


def _graph():
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")
    return grimp.build_graph("torchgrade", cache_dir=None)


def _circles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (networkx, which torch requires)."""
    import networkx

    edges = networkx.DiGraph((module, imported) for module in graph.modules
                             for imported in graph.find_modules_directly_imported_by(module))
    return sorted(sorted(component) for component in networkx.strongly_connected_components(edges)
                  if len(component) > 1)


def test_no_module_of_torchgrade_is_in_an_import_circle_imports_inside_functions_included():
    graph = _graph()
    circles = _circles(graph)
    detail = []
    for circle in circles:
        members = set(circle)
        detail += [f"{a} -> {b} (line {', '.join(str(d['line_number']) for d in graph.get_import_details(importer=a, imported=b))})"
                   for a in circle for b in sorted(graph.find_modules_directly_imported_by(a) & members)]
    assert not circles, "import circles:\n" + "\n".join(detail)


def test_the_circle_finder_finds_a_circle_through_a_package_and_its_own_module():
    """The finder above is no check that cannot fail: a package that imports its module which imports it back."""
    class Graph:
        modules = {"p", "p.a", "p.b", "q"}
        edges = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}, "q": {"p"}}

        def find_modules_directly_imported_by(self, module):
            return self.edges.get(module, set())

    assert _circles(Graph()) == [["p", "p.a", "p.b"]]


def test_the_import_contracts_hold_and_a_wrong_way_import_breaks_them(tmp_path):
    """`lint-imports` with pyproject.toml's contracts passes on the package, and fails on a copy of it in which
    the sandbox imports the engine from inside a function (a function-level import is no way around a layer)."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (the test extra)")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken" in done.stdout and " 0 broken" in done.stdout

    copy = tmp_path / "copy"
    copy.mkdir()
    subprocess.run(["cp", "-r", str(PACKAGE), str(copy / "torchgrade")], check=True)
    (copy / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    wire = copy / "torchgrade" / "sandbox" / "exits.py"
    wire.write_text(wire.read_text() + "\n\ndef _wrong():\n    from torchgrade.engine import scoring\n\n    return scoring\n")
    done = subprocess.run([str(lint), "--no-cache"], cwd=copy, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy)})
    assert done.returncode != 0 and "torchgrade.sandbox.exits -> torchgrade.engine.scoring" in done.stdout, done.stdout


def _imported_names(tree: ast.AST) -> list[tuple[str, int]]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append((node.module, node.lineno))
            names += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
    return names


def test_torchgrade_its_tests_and_the_bundled_course_import_modules_by_the_names_they_have_now():
    """An old name (torchgrade.differential) still imports (below), but the contracts cannot see through it:
    nothing of the project's own may use one."""
    old = {f"torchgrade.{name}" for name in MOVED}
    found = []
    for folder in ("torchgrade", "tests", "benchmarks", "graders", "reference"):
        for file in sorted((ROOT / folder).rglob("*.py")):
            if file.name == Path(__file__).name:
                continue
            try:
                tree = ast.parse(file.read_text(encoding="utf-8"))
            except SyntaxError:  # (the hostile corpus holds files that do not parse)
                continue
            found += [f"{file.relative_to(ROOT)}:{line}: {name}" for name, line in _imported_names(tree) if name in old]
    assert not found, "old module names imported:\n" + "\n".join(found)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_each_name_from_before_the_wings_is_the_module_it_became(old):
    """`from torchgrade.differential import CheckFailed` in a course's check file keeps working: one module
    object under both names, no second copy (whose classes would not be the engine's)."""
    moved = importlib.import_module(f"torchgrade.{old}")
    assert moved is importlib.import_module(f"torchgrade.{MOVED[old]}")
    assert sys.modules[f"torchgrade.{old}"] is moved
    assert moved.__name__ == moved.__spec__.name == f"torchgrade.{MOVED[old]}"  # its own name and spec kept


def test_the_names_courses_use_import_from_a_fresh_python():
    """What check files, probes and notebooks import (docs/authoring.md, graders/), in a process of its own."""
    code = ("from torchgrade.probes import probe, Target, tensor, ProbeError, Raised, raised, describe, grad_seed, clip\n"
            "from torchgrade.differential import CheckFailed\n"
            "from torchgrade.i18n import language, t\n"
            "import torchgrade, torchgrade.plugin, torchgrade.engine.plugin\n"
            "from torchgrade.executors.local import InProcess\n"
            "import torchgrade.classroom.executors.local as local\n"
            "assert InProcess is local.InProcess\n"
            "assert torchgrade.notebook.check and torchgrade.plugin.pytest_configure is torchgrade.engine.plugin.pytest_configure\n"
            "import torchgrade.engine.differential as engine\n"
            "assert CheckFailed is engine.CheckFailed\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_the_warm_up_imports_by_name_only_modules_outside_torchgrade():
    """sandbox/warmup.py imports torch's lazy modules by name (one may be absent): none of them is torchgrade's,
    so no import of the package's hides there."""
    from torchgrade.sandbox import warmup

    named = warmup._MODULES + warmup.LATER
    assert named and not [name for name in named if name.split(".")[0] == "torchgrade"]
    calls = []
    for file in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        calls += [f"{file.relative_to(PACKAGE)}" for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                  in ("import_module", "__import__")]
    # the alias of old names (torchgrade/__init__.py) and the warm-up (twice); nothing else imports by name
    assert sorted(calls) == ["__init__.py", "sandbox/warmup.py", "sandbox/warmup.py"], calls


@pytest.mark.parametrize("wing", ["base", "sandbox", "engine", "outputs", "classroom", "authoring"])
def test_each_wing_says_what_it_owns_and_what_it_may_import(wing):
    doc = importlib.import_module(f"torchgrade.{wing}").__doc__ or ""
    assert "may import" in doc and len(doc.split()) > 20, doc
