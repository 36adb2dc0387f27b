"""Student notebooks written from a course: each module's stub (or its reference) cut at its targets.

One notebook per exercise module (`bundle --notebook`, `init --notebook`, `stubs --notebook`): the module's docstring,
its imports, then per target a markdown cell (its docstring), its code and a `%torchgrade check` cell.
Reading what students hand in is torchgrade/engine/notebooks.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

from torchgrade.authoring.stubs import make_stub, refresh
from torchgrade.engine.notebooks import SKIP_TAG, notebook_text


def _segments(source: str, targets: set[str]) -> tuple[str, list[tuple[str, str, str]]]:
    """A module cut at its targets: the code before the first (its docstring left out), and per target
    (name, docstring, its code up to the next target). Joined again they are the module's code."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in targets:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            while first > 0 and lines[first - 1].lstrip().startswith("#"):  # its comment travels with it
                first -= 1
            starts.append((first, node.name, ast.get_docstring(node) or ""))
    begin = 0
    doc = tree.body[0] if tree.body and isinstance(tree.body[0], ast.Expr) and \
        isinstance(getattr(tree.body[0], "value", None), ast.Constant) and isinstance(tree.body[0].value.value, str) else None
    if doc is not None:
        begin = doc.end_lineno
    cut = [s[0] for s in starts] + [len(lines)]
    prelude = "".join(lines[begin:cut[0]]).strip("\n")
    parts = [(name, docstring, "".join(lines[start:cut[i + 1]]).strip("\n"))
             for i, (start, name, docstring) in enumerate(starts)]
    return prelude, parts


def module_notebook(source: str, exercise: str, targets: list[str], title: str = "") -> dict:
    """A student notebook of one module: how to check, the module's docstring, its imports, then per
    target a markdown cell (its docstring), a code cell (its code) and a check cell."""
    import nbformat
    from nbformat import v4

    prelude, parts = _segments(source, set(targets))
    module_doc = ast.get_docstring(ast.parse(source)) or ""
    cells = [
        v4.new_markdown_cell(f"# {title or exercise}\n\n{module_doc}".rstrip()),
        v4.new_markdown_cell(
            "Write each function in its code cell and run the check cell below it: it grades the code this "
            "notebook has run, in a sandbox, with the course's visible checks. The kernel must run in the course "
            "folder (Colab: upload the course, `!pip install -q ./COURSE`, `%cd COURSE`); see torchgrade's "
            f"docs/notebooks.md. Cells tagged `{SKIP_TAG}` (or starting with `# {SKIP_TAG}`) are not graded."),
        v4.new_code_cell(f"# {SKIP_TAG}\n%load_ext torchgrade", metadata={"tags": [SKIP_TAG]}),
    ]
    if prelude:
        cells.append(v4.new_code_cell(prelude))
    for name, docstring, code in parts:
        cells.append(v4.new_markdown_cell(f"## `{name}`\n\n{docstring}".rstrip()))
        cells.append(v4.new_code_cell(code))
        cells.append(v4.new_code_cell(f"%torchgrade check {exercise}.{name}"))
    for index, cell in enumerate(cells, 1):  # the same module gives the same bytes (nbformat's ids are random)
        cell["id"] = f"{exercise}-{index}"
    node = v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    nbformat.validate(node)
    return node


def generate_notebooks(assignment, out: Path, write: bool = True, from_reference: bool = False) -> list[Path]:
    """`<out>/<module>.ipynb` for each exercise, from its stub (or the reference itself: a notebook that
    must score full marks); return the notebooks whose content changed (or would)."""
    changed = []
    for exercise in assignment.exercises:
        reference = assignment.reference_dir / f"{exercise.name}.py"
        if not reference.is_file():
            continue
        text = reference.read_text(encoding="utf-8")
        source = text if from_reference else make_stub(text, str(reference))
        node = module_notebook(source, exercise.name, [t.name for t in exercise.targets], exercise.title)
        path = out / f"{exercise.name}.ipynb"
        if refresh(path, notebook_text(node), write):
            changed.append(path)
    return changed


