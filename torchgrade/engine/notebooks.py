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
import hashlib
import json
import re
import shutil
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from torchgrade.base.printable import shown
from torchgrade.sandbox.sources import MAX_SOURCE_BYTES

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
#
# The notebook is the student's to make and the trusted process reads it, so every step is bounded
# before it costs anything: the raw text is scanned (linearly, in C but for one step per string) for
# its nesting depth and how many values it holds before `json.loads` builds any of them; outputs are
# dropped as they are parsed (never validated, never kept); the code cells' text is bounded like a
# `.py` (torchgrade/sandbox/sources.py) before any of it is parsed; conversion has a deadline.

#: Deeper JSON than any notebook writes (nbformat's own is 7; widget state a few more); json.loads recurses.
MAX_DEPTH = 64
#: Values (strings, numbers, lists, objects) a notebook may hold: each is a Python object once parsed.
MAX_VALUES = 500_000
#: Seconds the trusted process spends converting one notebook's cells.
MAX_SECONDS = 20.0
#: Notebooks converted, kept by their content's digest (a submission's modules: read by `prepare`, then by
#: `cell_maps`), never by their text.
CONVERTED_KEPT = 16

_BRACKET = re.compile(r"[\[\]{}]")
_converted: OrderedDict[tuple[str, str, str], Converted | NotebookError] = OrderedDict()
#: {the .py a notebook would have been: why it was not} for the modules `prepare` could not make.
_not_graded: dict[str, str] = {}


def _past_bounds(text: str) -> str | None:
    """Why the JSON `text` is past what torchgrade reads (too deep, too many values), else None; ValueError
    where a string in it never ends. One pass: the text between two strings is counted by str's own
    methods, each string skipped by json's own scanner."""
    depth = values = 0
    pos, end, scan = 0, len(text), json.decoder.scanstring
    while True:
        quote = text.find('"', pos)
        between = text[pos:quote if quote >= 0 else end]
        opened = between.count("[") + between.count("{")
        values += opened + between.count(",") + 1
        if values > MAX_VALUES:
            return f"it holds more than {MAX_VALUES:,} values"
        if opened or "]" in between or "}" in between:
            for bracket in _BRACKET.findall(between):
                depth += 1 if bracket in "[{" else -1
                if depth > MAX_DEPTH:
                    return f"it is nested more than {MAX_DEPTH} levels deep"
        if quote < 0:
            return None
        pos = scan(text, quote + 1)[1]


def _drop_output(node: dict) -> dict | None:
    """json.loads' object_hook: an output (what a cell printed or drew) is dropped as soon as it is parsed."""
    return None if "output_type" in node else node


def read(path: Path, name: str | None = None) -> dict:
    """The notebook at `path` as nbformat's node, its outputs left out; NotebookError saying what is wrong
    and what to do."""
    name = shown(name or path.name)
    return _guarded(name, _parse, _bytes(path, name), name)


def _bytes(path: Path, name: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(_too_big(name, f"{size / 1024**2:.0f} MB"))
        return path.read_bytes()
    except OSError as e:
        raise NotebookError(f"{name} cannot be read: {e.strerror or e}") from None


def _guarded(name: str, work, *args):
    """`work(*args)`, any failure of the parsers' own (RecursionError, MemoryError) a NotebookError."""
    try:
        return work(*args)
    except (RecursionError, MemoryError, ValueError, TypeError, AttributeError) as e:
        raise NotebookError(f"{name} could not be read as a notebook ({type(e).__name__}): open it in Jupyter "
                            f"or Colab and save it again") from None


def _too_big(name: str, what: str) -> str:
    return (f"{name} is {what}, more than torchgrade reads ({MAX_NOTEBOOK_BYTES // 1024**2} MB): clear its "
            f"outputs (Edit > Clear all outputs) and save it again")


def _parse(data: bytes, name: str) -> dict:
    import nbformat

    not_json = NotebookError(f"{name} is not a notebook (its content is not JSON): save it from Jupyter or Colab "
                             f"(File > Download > .ipynb) and hand that file in")
    try:
        text = data.decode("utf-8-sig")
        past = _past_bounds(text)
        if past is not None:
            raise NotebookError(f"{name} is not a notebook torchgrade reads ({past}; Jupyter and Colab write "
                                f"far less): clear its outputs (Edit > Clear all outputs) and save it again")
        raw = json.loads(text, object_hook=_drop_output)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise not_json from None
    if not isinstance(raw, dict) or not ("cells" in raw or "worksheets" in raw):
        raise NotebookError(f"{name} is JSON but not a notebook (it has no cells): hand in the .ipynb that "
                            f"Jupyter or Colab saves")
    cells = raw.get("cells")
    if isinstance(cells, list) and len(cells) > MAX_CELLS:
        raise NotebookError(f"{name} has {len(cells)} cells, more than torchgrade reads ({MAX_CELLS}): hand in the "
                            f"notebook of the exercise itself")
    version = raw.get("nbformat")
    if version != 4:
        raise NotebookError(f"{name} is in notebook format {version!r}; torchgrade reads format 4 (Jupyter and "
                            f"Colab write it): open it in Jupyter and save it again")
    why = _unreadable(raw)  # what grading reads; nothing else of nbformat's schema is checked (outputs least)
    if why:
        raise NotebookError(f"{name} is not a valid notebook ({why}): open it in Jupyter or Colab and "
                            f"save it again")
    for cell in cells:
        if "outputs" in cell:
            cell["outputs"] = []
    node = nbformat.from_dict(raw)
    meta = node.get("metadata") or {}
    if not isinstance(meta, dict):
        meta = {}
    kernelspec = meta.get("kernelspec") if isinstance(meta.get("kernelspec"), dict) else {}
    language_info = meta.get("language_info") if isinstance(meta.get("language_info"), dict) else {}
    language = kernelspec.get("language") or language_info.get("name")
    if isinstance(language, str) and language.strip().lower() not in ("python", "python3", ""):
        kernel = kernelspec.get("display_name") or language
        raise NotebookError(f"{name} is a notebook for {shown(kernel)} ({shown(language)}), not Python: the "
                            f"exercises are Python, so write them in a notebook with a Python 3 kernel")
    return node


def _unreadable(node: dict) -> str:
    """Why a cell cannot be graded (it lacks a type or a source), or ""."""
    cells = node.get("cells")
    if not isinstance(cells, list):
        return "it has no list of cells"
    for index, c in enumerate(cells, 1):
        if not (isinstance(c, dict) and isinstance(c.get("cell_type"), str) and
                (isinstance(c.get("source"), str) or (isinstance(c.get("source"), list)
                                                      and all(isinstance(s, str) for s in c["source"])))):
            return f"cell {index} has no type or no source"
    return ""


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
    """The module a notebook stands for; NotebookError when it holds no code to grade, or more code
    than an exercise file may (`sources.MAX_SOURCE_BYTES`), or takes longer than MAX_SECONDS."""
    converted = Converted(name, "")
    out: list[str] = [HEADER.format(name=name)]
    converted.origin.append(("cell 1", 0))
    code_cells = 0
    chosen = []
    for index, cell in enumerate(node.get("cells") or [], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = _text(cell.get("source"))
        if source.strip() and not _skipped(cell, skip_tag):
            chosen.append((index, cell, source))
    size = sum(len(source.encode("utf-8", "surrogatepass")) for _, _, source in chosen)
    if size > MAX_SOURCE_BYTES:  # before any of it is parsed: a .py this large is not read either
        raise NotebookError(f"{name}'s code cells hold {size / (1 << 20):.1f} MiB; an exercise may be at most "
                            f"{MAX_SOURCE_BYTES // (1 << 20)} MiB of code: keep data out of it (load it from a "
                            f"file instead)")
    deadline = time.monotonic() + MAX_SECONDS
    for index, cell, source in chosen:
        if time.monotonic() > deadline:
            raise NotebookError(f"{name} took torchgrade more than {MAX_SECONDS:.0f} s to read: hand in the "
                                f"notebook of the exercise itself")
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
    """`read` then `convert`, kept by the file's digest (a submission's notebook is read by `prepare`, then
    by `cell_maps`): any failure, the parser's own (RecursionError, MemoryError) included, is a NotebookError."""
    name = shown(name or path.name)
    data = _bytes(path, name)
    key = (hashlib.sha256(data).hexdigest(), name, skip_tag)
    if key not in _converted:
        try:
            _converted[key] = _guarded(name, lambda: convert(_parse(data, name), name, skip_tag))
        except NotebookError as e:
            _converted[key] = e
        while len(_converted) > CONVERTED_KEPT:
            _converted.popitem(last=False)
    _converted.move_to_end(key)
    found = _converted[key]
    if isinstance(found, NotebookError):
        raise NotebookError(str(found))
    return found


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
        else:  # each check of the module is an error row that says why (`not_graded`)
            _not_graded[str(py)] = str(converted)
            while len(_not_graded) > CONVERTED_KEPT:
                _not_graded.pop(next(iter(_not_graded)))
    return notes


def not_graded(py: Path) -> str | None:
    """Why the module `py` stands for was not graded, where `prepare` found its notebook unreadable."""
    return _not_graded.get(str(py)) if not py.exists() else None


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
