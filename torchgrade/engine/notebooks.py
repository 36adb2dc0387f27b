"""Notebooks as submissions: a `.ipynb` read with nbformat becomes the module it stands for.

A notebook's code cells, in order, are the module; IPython-only lines (`%magic`, `!shell`, `?help`,
`get_ipython()...`) and the in-notebook check's own lines become comments; a whole `%%cell magic`
cell becomes comments; cells the course's tag marks (default `skip-grading`, or a first line
`# skip-grading`) and every output are left out. The module is written as `<module>.py` into a
folder only the grader uses (a staged submission, or a copy for `torchgrade check`), and graded
exactly as a `.py` is. `relabel` then rewrites, in the trusted process, every "tensors.py, line 12"
of a message into "tensors.ipynb, cell 7, line 3" with the map kept here: nothing of this runs in
the sandbox. A notebook and a `.py` for the same module: the `.py` is graded, a note says so.

The in-kernel check (`check`, `%torchgrade check ...`) is torchgrade/notebook.py; the notebooks a course
gives its students are written by torchgrade/authoring/notebooks.py.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from torchgrade.base.printable import shown

#: The tag (Jupyter's cell tags; Colab: a first line `# skip-grading`) that leaves a cell out of grading.
SKIP_TAG = "skip-grading"
#: A notebook larger than this is not read (outputs are ignored, but they are still bytes to parse).
MAX_NOTEBOOK_BYTES = 20 * 1024**2
#: More cells than any exercise notebook has (checking each costs the grader time: a hostile notebook's thousands).
MAX_CELLS = 5000
#: The first line of every module made from a notebook: `cell_maps` knows its own work by it.
HEADER = "# Made by torchgrade from {name}: its code cells in order; IPython-only lines are comments."
#: Metadata a code cell may carry to be named otherwise than "cell N" (the in-kernel check: "In [7]").
LABEL_KEY = "torchgrade"

_CELL_MAGIC = re.compile(r"^\s*%%")
#: Cell magics whose body runs as Python in the kernel's own namespace: it is part of the module.
_PYTHON_CELL_MAGICS = {"time", "capture", "prun"}
_IPYTHON_LINE = re.compile(r"^\s*(?:[%!?]|[\w.]+\s*\?{1,2}\s*$|[\w.,\s\[\]()*]+=\s*[!%])")
_GET_IPYTHON = re.compile(r"^\s*get_ipython\(\)")
_GRADER_LINE = re.compile(r"^\s*(?:%load_ext\s+torchgrade\b|%torchgrade\b)")


class NotebookError(Exception):
    """A file is not a notebook torchgrade can grade; the message says why and what to do."""


@dataclass(frozen=True)
class NotebookRules:
    """What a course says about notebooks (assignment.yaml `notebooks:`)."""

    #: The one notebook every exercise lives in (its file name), or "" (each module its own `<module>.ipynb`).
    file: str = ""
    skip_tag: str = SKIP_TAG


@dataclass
class Converted:
    """A notebook as a module: its source, and where each of its lines came from."""

    name: str
    source: str
    #: For line n of the source (index n - 1): (the cell's label, its line in the cell); 0 for a line of ours.
    origin: list[tuple[str, int]] = field(default_factory=list)
    #: Top-level work (loops, calls) that runs when the module is imported: (cell label, line, the line).
    work: list[tuple[str, int, str]] = field(default_factory=list)

    def where(self, line: int) -> str:
        """`cell 7, line 3` for line `line` of the module."""
        if not self.origin:
            return f"line {line}"
        label, inner = self.origin[min(max(line, 1), len(self.origin)) - 1]
        return f"{label}, line {max(inner, 1)}"


# --- reading ---

def read(path: Path, name: str | None = None) -> dict:
    """The notebook at `path` as nbformat's node; NotebookError saying what is wrong and what to do."""
    import nbformat

    name = shown(name or path.name)
    try:
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"{name} is {size / 1024**2:.0f} MB, more than torchgrade reads "
                                f"({MAX_NOTEBOOK_BYTES // 1024**2} MB): clear its outputs (Edit > Clear all outputs) "
                                f"and save it again")
        data = path.read_bytes()
    except OSError as e:
        raise NotebookError(f"{name} cannot be read: {e.strerror or e}") from None
    try:
        raw = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        raise NotebookError(f"{name} is not a notebook (its content is not JSON): save it from Jupyter or Colab "
                            f"(File > Download > .ipynb) and hand that file in") from None
    if not isinstance(raw, dict) or not ("cells" in raw or "worksheets" in raw):
        raise NotebookError(f"{name} is JSON but not a notebook (it has no cells): hand in the .ipynb that "
                            f"Jupyter or Colab saves")
    cells = raw.get("cells")
    if isinstance(cells, list) and len(cells) > MAX_CELLS:  # before nbformat validates them all (seconds each 10k)
        raise NotebookError(f"{name} has {len(cells)} cells, more than torchgrade reads ({MAX_CELLS}): hand in the "
                            f"notebook of the exercise itself")
    version = raw.get("nbformat")
    if version != 4:
        raise NotebookError(f"{name} is in notebook format {version!r}; torchgrade reads format 4 (Jupyter and "
                            f"Colab write it): open it in Jupyter and save it again")
    node = nbformat.from_dict(raw)
    try:
        with warnings.catch_warnings():  # a cell without an id (nbformat 4.4 and older): valid, if old
            warnings.simplefilter("ignore")
            nbformat.validate(node, version=4)
    except Exception as e:  # nbformat's ValidationError: graded anyway if its cells can be read
        if not _readable(node):
            why = " ".join(str(getattr(e, "message", e)).split())[:200]
            raise NotebookError(f"{name} is not a valid notebook ({why}): open it in Jupyter or Colab and "
                                f"save it again") from None
    meta = node.get("metadata") or {}
    language = (meta.get("kernelspec") or {}).get("language") or (meta.get("language_info") or {}).get("name")
    if isinstance(language, str) and language.strip().lower() not in ("python", "python3", ""):
        kernel = (meta.get("kernelspec") or {}).get("display_name") or language
        raise NotebookError(f"{name} is a notebook for {shown(kernel)} ({shown(language)}), not Python: the "
                            f"exercises are Python, so write them in a notebook with a Python 3 kernel")
    return node


def _readable(node: dict) -> bool:
    """Whether every cell has a type and a source (what grading reads), whatever else a tool wrote."""
    cells = node.get("cells")
    return isinstance(cells, list) and all(
        isinstance(c, dict) and isinstance(c.get("cell_type"), str) and
        (isinstance(c.get("source"), str) or (isinstance(c.get("source"), list)
                                              and all(isinstance(s, str) for s in c["source"])))
        for c in cells)


def _text(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


# --- converting ---

def _skipped(cell: dict, skip_tag: str) -> bool:
    tags = (cell.get("metadata") or {}).get("tags") or []
    first = next((line.strip() for line in _text(cell.get("source")).splitlines() if line.strip()), "")
    return skip_tag in tags or first == f"# {skip_tag}"


_MAGIC_ASSIGNMENT = re.compile(r"^(\s*)([\w.,\s\[\]()*]+?)\s*=\s*[!%]")


def _commented(line: str) -> str:
    """A line turned into a comment; `pass` keeps an indented block a block, and a name assigned from a
    magic or the shell (`files = !ls`, `v = %torchgrade check x`) stays defined, as None."""
    assigned = _MAGIC_ASSIGNMENT.match(line)
    if assigned:
        return f"{assigned[1]}{assigned[2].strip()} = None  # {line.strip()}"
    indent = line[:len(line) - len(line.lstrip())]
    return f"{indent}pass  # {line.strip()}" if indent else f"# {line}"


def _grader_statements(tree: ast.Module) -> set[int]:
    """Lines of top-level statements that are the in-notebook check's own: `import torchgrade...`,
    `torchgrade.notebook.check(...)` (also assigned), `from torchgrade... import ...`."""
    def is_check(node: ast.AST) -> bool:
        func = node.func if isinstance(node, ast.Call) else None
        while isinstance(func, ast.Attribute):
            func = func.value
        return isinstance(func, ast.Name) and func.id == "torchgrade"

    lines: set[int] = set()
    for node in tree.body:
        mine = (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torchgrade" for a in node.names)) or \
            (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torchgrade") or \
            (isinstance(node, (ast.Expr, ast.Assign)) and is_check(node.value))
        if mine:
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _work(tree: ast.Module) -> list[int]:
    """The lines of top-level statements that do work when imported: loops, calls."""
    found = []
    for node in tree.body:
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            found.append(node.lineno)
        elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await)):
            found.append(node.lineno)
    return found


def python_lines(source: str) -> tuple[list[str], list[int]]:
    """A code cell's lines as Python, and the lines (1-based) of its top-level work.

    A cell that parses as Python keeps every line but the check's own and `get_ipython()...` lines;
    one that does not (it holds IPython syntax) has its IPython-only lines commented out."""
    lines = source.splitlines()
    if lines and _CELL_MAGIC.match(lines[0]):
        magic = lines[0].strip()[2:].split(" ")[0]
        if magic not in _PYTHON_CELL_MAGICS:  # %%bash, %%writefile, %%html, %%timeit (its own scope): not the module's
            return [f"# {line}" for line in lines], []
        body, work = python_lines("\n".join(lines[1:]))  # %%time, %%capture: the body ran in the kernel's namespace
        return [f"# {lines[0]}", *body], [n + 1 for n in work]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    if tree is None:
        lines = [_commented(line) if _IPYTHON_LINE.match(line) else line for line in lines]
        try:
            tree = ast.parse("\n".join(lines))
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # the student's own syntax error: graded, and reported with its cell
            return lines, []
    mine = _grader_statements(tree)
    # the check's own statements are top-level (continuation lines too): comments as they are
    out = [f"# {line}" if i in mine else _commented(line) if _GET_IPYTHON.match(line) or _GRADER_LINE.match(line)
           else line for i, line in enumerate(lines, 1)]
    return out, [n for n in _work(tree) if n not in mine]


def convert(node: dict, name: str, skip_tag: str = SKIP_TAG) -> Converted:
    """The module a notebook stands for; NotebookError when it holds no code to grade."""
    converted = Converted(name, "")
    out: list[str] = [HEADER.format(name=name)]
    converted.origin.append(("cell 1", 0))
    code_cells = 0
    for index, cell in enumerate(node.get("cells") or [], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = _text(cell.get("source"))
        if not source.strip() or _skipped(cell, skip_tag):
            continue
        code_cells += 1
        custom = ((cell.get("metadata") or {}).get(LABEL_KEY) or {})
        label = custom.get("label") if isinstance(custom, dict) and isinstance(custom.get("label"), str) else ""
        label = shown(label)[:40] if label else f"cell {index}"
        lines, work = python_lines(source)
        out.append("")
        out.append(f"# {label}")
        converted.origin += [(label, 0), (label, 0)]
        out += lines
        converted.origin += [(label, n) for n in range(1, len(lines) + 1)]
        converted.work += [(label, n, lines[n - 1].strip()) for n in work]
    if not code_cells:
        raise NotebookError(f"{name} holds no code to grade (no code cell, or every one empty or tagged "
                            f"{skip_tag}): write your functions in code cells and save the notebook")
    out.append("")
    converted.origin.append(converted.origin[-1])
    converted.source = "\n".join(out)
    return converted


def convert_file(path: Path, skip_tag: str = SKIP_TAG, name: str | None = None) -> Converted:
    """`read` then `convert`."""
    return convert(read(path, name), shown(name or path.name), skip_tag)


# --- a course's rules, a folder's notebooks ---

def rules(assignment) -> NotebookRules:
    """The course's notebook settings (assignment.yaml `notebooks:`)."""
    return getattr(assignment, "notebooks", None) or NotebookRules()


def module_names(assignment) -> tuple[str, ...]:
    """The names an exercise file may have in a submission (as `.py` or `.ipynb`): each exercise's, and
    the stem of the course's one notebook where it has one."""
    names = tuple(e.name for e in assignment.exercises)
    one = rules(assignment).file
    return names + ((one[:-len(".ipynb")],) if one and one[:-len(".ipynb")] not in names else ())


def notebook_for(folder: Path, exercise: str, notebook_rules: NotebookRules) -> Path | None:
    """The notebook that holds `exercise` in `folder`: `<exercise>.ipynb`, else the course's one notebook."""
    for name in (f"{exercise}.ipynb", notebook_rules.file):
        if name and (folder / name).is_file() and not (folder / name).is_symlink():
            return folder / name
    return None


def has_notebooks(folder: Path, assignment) -> bool:
    """Whether some exercise of the folder stands as a notebook only (no `.py` beside it)."""
    found = rules(assignment)
    return any(notebook_for(folder, e.name, found) is not None and not (folder / f"{e.name}.py").exists()
               for e in assignment.exercises)


def prepare(folder: Path, assignment) -> list[str]:
    """Write `<module>.py` for every exercise `folder` holds as a notebook only (the folder is the
    grader's own: a staged submission or a copy); return notes for the student (a notebook that cannot
    be read, a notebook and a `.py` for one module)."""
    notebook_rules = rules(assignment)
    notes: list[str] = []
    done: dict[str, Converted | NotebookError] = {}  # the course's one notebook is read once
    for exercise in assignment.exercises:
        path = notebook_for(folder, exercise.name, notebook_rules)
        if path is None:
            continue
        py = folder / f"{exercise.name}.py"
        if py.exists():
            if path.name == f"{exercise.name}.ipynb":
                notes.append(f"{exercise.name}.py and {shown(path.name)} were both handed in: {exercise.name}.py is "
                             f"graded (a .py file always wins over a notebook of the same module)")
            continue
        if path.name not in done:
            try:
                done[path.name] = convert_file(path, notebook_rules.skip_tag)
            except NotebookError as e:
                done[path.name] = e
                notes.append(f"{e} (the exercises in it are not graded)")
        converted = done[path.name]
        if isinstance(converted, Converted):
            py.write_text(converted.source, encoding="utf-8")
    return notes


def cell_maps(folder: Path, assignment) -> dict[str, Converted]:
    """{exercise: its notebook as converted} for each module of `folder` made from a notebook (the
    `.py` there is exactly the conversion of the notebook beside it), for `relabel`."""
    maps: dict[str, Converted] = {}
    notebook_rules = rules(assignment)
    done: dict[str, Converted | None] = {}
    for exercise in assignment.exercises:
        py = folder / f"{exercise.name}.py"
        path = notebook_for(folder, exercise.name, notebook_rules)
        if path is None or not py.is_file():
            continue
        try:
            text = py.read_text(encoding="utf-8")
            if not text.startswith(HEADER.format(name=shown(path.name))):
                continue
            if path.name not in done:
                done[path.name] = convert_file(path, notebook_rules.skip_tag)
        except (OSError, UnicodeDecodeError, NotebookError):
            done[path.name] = None
        converted = done.get(path.name)
        if converted is not None and converted.source == text:
            maps[exercise.name] = converted
    return maps


_IMPORT_TIMEOUT = "importing {module} took longer than"
#: The import hint's advice for a .py (torchgrade/engine/hints.py), and what it means for a notebook.
IMPORT_ADVICE = ("run `python -c \"import <module>\"` in your exercises folder to see the error",
                 "run the notebook from the top (Restart and Run All) to see the error")


def relabel(text: str, maps: dict[str, Converted]) -> str:
    """A message with every "tensors.py, line 12" of a module made from a notebook as "tensors.ipynb,
    cell 7, line 3", and the module named by its notebook; a time limit hit at import says which cells
    do top-level work and how to keep it out of grading."""
    for exercise, converted in maps.items():
        module = f"{exercise}.py"
        if module not in text:
            continue
        timed_out = _IMPORT_TIMEOUT.format(module=module) in text
        line_ref = re.compile(r'(?:[^\s"\']*[/\\])?(?<![\w.])' + re.escape(module) + r'(")?,? line (\d+)')
        text = line_ref.sub(lambda m: f'{converted.name}{m[1] or ""}, {converted.where(int(m[2]))}', text)
        text = re.sub(r"(?<![\w.])" + re.escape(module) + r"(?!\w)", converted.name, text)
        text = text.replace(*IMPORT_ADVICE)
        if timed_out:  # before the message's own hint line, which is its last (bounds.clip_message keeps it)
            head, sep, hint = text.rpartition("\nhint: ")
            text = f"{head}\n{top_level_hint(converted)}{sep}{hint}" if sep else f"{text}\n{top_level_hint(converted)}"
    return text


def top_level_hint(converted: Converted) -> str:
    """What runs at import, and how to keep it out of grading."""
    where = "; ".join(f"{label}, line {line}: `{shown(code)[:60]}`" for label, line, code in converted.work[:3])
    ran = f"top-level code runs when {converted.name} is graded ({where})" if where else \
        f"every top-level line of {converted.name} runs when it is graded"
    return (f"{ran[0].upper()}{ran[1:]}: keep training loops and experiments out of grading by tagging their cells "
            f"{SKIP_TAG} (or starting them with the line `# {SKIP_TAG}`), or by putting them under "
            f'`if __name__ == "__main__":`')


@contextlib.contextmanager
def graded_folder(folder: Path, assignment) -> Iterator[tuple[Path, list[str]]]:
    """The folder to grade for `folder` (a student's own, as `torchgrade check` takes it): itself when no
    module stands as a notebook there, else a private copy with the notebooks converted, and the notes."""
    if not has_notebooks(folder, assignment):
        yield folder, []
        return
    copy = Path(tempfile.mkdtemp(prefix="torchgrade-notebooks-"))
    try:
        work = copy / (folder.resolve().name or "work")  # reports name the submission after its folder
        work.mkdir()
        # the modules only (a notebook folder often holds data sets: never copied on every check)
        for path in sorted(folder.iterdir()):
            if path.suffix in (".py", ".ipynb") and path.is_file() and not path.name.startswith("."):
                shutil.copyfile(path, work / path.name)
        yield work, prepare(work, assignment)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def notebook_text(node: dict) -> str:
    """A notebook as the bytes nbformat writes (one indented JSON document)."""
    import nbformat

    return nbformat.writes(node) + "\n"
