"""Similarity, per function: which students handed in the same code for a target (`torchgrade similarity OUT`).

The code compared is each student's, as `torchgrade grade` kept it (DIR/<student>/instructor/code/<module>.py),
one target at a time: the definition of that name in the module (the last one, as Python keeps it), a
function or a class. Each is reduced to the sequence of its syntax tree's nodes, so that formatting,
comments, docstrings and parentheses vanish, with every local name (variables, arguments, helpers) replaced
by its order of first use, so that renaming changes nothing; attribute and library names (`torch.zeros`,
`.shape`) are kept. Two versions are compared by the sets of their runs of K consecutive nodes (K-grams,
as MOSS and copydetect do with tokens): the Jaccard index of the two sets, after the runs of the stub's
own code for that target (its signature and docstring) are taken out as boilerplate. The reference and
an optional folder of known solutions are compared with every student too.

Why the syntax tree and not copydetect (a kept library: pygments tokens, winnowing): the comparison is per
target, so every version must be cut out of its module, which needs the syntax tree anyway; on the tree,
reformatting (line breaks, parentheses, trailing commas, quotes) cannot change a token; and the counts are
one sparse matrix product per target (numpy, already a dependency), where copydetect compares file pairs
one by one in Python. docs/class-grading.md gives the figures for a class of 300.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from .config import Assignment

#: The page `torchgrade similarity` writes into the output folder (index.html links to it).
PAGE = "similarity.html"
#: Where `torchgrade grade` keeps each student's code: DIR/<student>/instructor/CODE_FOLDER/<module>.py.
CODE_FOLDER = "code"
#: Nodes per run compared (shorter runs match by chance in any two functions of a few lines).
K = 8
#: Pairs below this similarity are not listed (the page says so).
THRESHOLD = 0.6
#: The most pairs the page lists.
MOST = 200
_BUILTINS = frozenset(dir(builtins))


class SimilarityError(Exception):
    """The folder holds no code to compare (one line saying why)."""


@dataclass
class Version:
    """One person's code for one target: its lines, and its K-grams with the lines each covers."""

    owner: str
    source: bool  # the reference or a known solution, not a student
    lines: list[str]
    first: int  # the line number of lines[0] in the module
    grams: dict[int, set[int]] = field(default_factory=dict)  # K-gram hash -> line numbers it covers


def _definition(tree: ast.Module, name: str) -> ast.AST | None:
    """The module's (last) top-level definition of `name`: a def, a class, or an assignment (`view = ...`)."""
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            found = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node
    return found


def _tokens(node: ast.AST) -> list[tuple[str, int]]:
    """The node's syntax tree as (token, line) in order: node kinds, local names by order of first use,
    kept attribute and library names, constants by kind (numbers by value); docstrings left out."""
    names: dict[str, str] = {}
    out: list[tuple[str, int]] = []

    def local(name: str) -> str:
        if name in _BUILTINS:
            return name
        return names.setdefault(name, f"v{len(names)}")

    def visit(n: ast.AST, line: int) -> None:
        line = getattr(n, "lineno", line)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body \
                and isinstance(n.body[0], ast.Expr) and isinstance(getattr(n.body[0], "value", None), ast.Constant) \
                and isinstance(n.body[0].value.value, str):
            n = type(n)(**{**{f: getattr(n, f) for f in n._fields}, "body": n.body[1:]})  # no docstring
            n.lineno = line
        out.append((type(n).__name__, line))
        if isinstance(n, ast.Name):
            out.append((local(n.id), line))
        elif isinstance(n, ast.arg):
            out.append((local(n.arg), line))
        elif isinstance(n, ast.Attribute):
            out.append(("." + n.attr, line))
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((local(n.name), line))
        elif isinstance(n, ast.Constant):
            value = n.value
            out.append((repr(value) if isinstance(value, (int, float, bool, type(None))) else type(value).__name__, line))
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)):
                visit(child, line)
            else:
                out.append((type(child).__name__, line))

    visit(node, getattr(node, "lineno", 1))
    return out


def _grams(tokens: list[tuple[str, int]]) -> dict[int, set[int]]:
    grams: dict[int, set[int]] = {}
    for i in range(max(0, len(tokens) - K + 1)):
        run = tokens[i:i + K]
        digest = hashlib.blake2b("\x1f".join(t for t, _ in run).encode(), digest_size=8).digest()
        grams.setdefault(int.from_bytes(digest, "big") >> 1, set()).update(line for _, line in run)
    return grams


def version(owner: str, text: str, target: str, *, source: bool = False) -> Version | None:
    """`owner`'s code for `target` in a module's text (None where the module does not parse or lacks it)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    node = _definition(tree, target)
    if node is None:
        return None
    lines = text.splitlines()
    first, last = node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno
    if getattr(node, "decorator_list", None):
        first = min(first, *(d.lineno for d in node.decorator_list))
    return Version(owner, source, lines[first - 1:last], first, _grams(_tokens(node)))


@dataclass(frozen=True)
class Pair:
    """Two versions of one target that share much of their code."""

    target: str
    a: Version
    b: Version
    similarity: float

    def side(self, which: str) -> list[tuple[int, str, bool]]:
        """(line number, text, matched) for each line of one side's version."""
        mine, other = (self.a, self.b) if which == "a" else (self.b, self.a)
        shared = set(mine.grams) & set(other.grams)
        matched = set().union(*(mine.grams[g] for g in shared)) if shared else set()
        return [(mine.first + i, text, mine.first + i in matched) for i, text in enumerate(mine.lines)]


def compare(versions: list[Version], boilerplate: set[int], target: str, threshold: float = THRESHOLD) -> list[Pair]:
    """Every pair of versions of `target` at or above `threshold` (sources are not compared with each other),
    with the boilerplate's K-grams left out."""
    import numpy as np

    sets = [set(v.grams) - boilerplate for v in versions]
    vocabulary = {g: i for i, g in enumerate(sorted(set().union(*sets)))} if sets else {}
    if len(versions) < 2 or not vocabulary:
        return []
    matrix = np.zeros((len(versions), len(vocabulary)), dtype=np.float32)
    for row, grams in enumerate(sets):
        matrix[row, [vocabulary[g] for g in grams]] = 1.0
    shared = matrix @ matrix.T  # K-grams two versions have in common
    sizes = matrix.sum(axis=1)
    union = sizes[:, None] + sizes[None, :] - shared
    with np.errstate(divide="ignore", invalid="ignore"):
        jaccard = np.where(union > 0, shared / union, 0.0)
    pairs = []
    rows, cols = np.nonzero(np.triu(jaccard >= threshold, k=1))
    for i, j in zip(rows.tolist(), cols.tolist()):
        if versions[i].source and versions[j].source:
            continue
        a, b = (versions[i], versions[j]) if not versions[i].source else (versions[j], versions[i])
        pairs.append(Pair(target, a, b, float(jaccard[i, j])))
    return pairs


def modules(folder: Path, names: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for name in names:
        path = folder / f"{name}.py"
        if path.is_file() and not path.is_symlink():
            found[name] = path.read_text(encoding="utf-8", errors="replace")
    return found


def known_sources(folder: Path, names: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """A folder of known solutions: each subfolder one source (its module files), and module files directly
    inside it one more, named after the folder."""
    sources = {}
    if modules(folder, names):
        sources[folder.name] = modules(folder, names)
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()):
        found = modules(sub, names)
        if found:
            sources[f"{folder.name}/{sub.name}"] = found
    return sources


def class_code(out: Path, names: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Each graded student's modules, as `torchgrade grade` kept them in DIR."""
    from .results import INSTRUCTOR_FOLDER

    code = {}
    for folder in sorted(p for p in Path(out).iterdir() if p.is_dir() and not p.name.startswith(".")):
        kept = folder / INSTRUCTOR_FOLDER / CODE_FOLDER
        if kept.is_dir():
            code[folder.name] = modules(kept, names)
    return code


@dataclass
class Report:
    pairs: list[Pair]
    students: int
    sources: list[str]
    targets: int
    threshold: float


def analyse(students: dict[str, dict[str, str]], assignment: Assignment, sources: dict[str, dict[str, str]],
            threshold: float = THRESHOLD) -> Report:
    """Every pair at or above `threshold`, target by target, the most similar first."""
    names = tuple(e.name for e in assignment.exercises)
    stubs = modules(assignment.stubs_dir, names)
    pairs: list[Pair] = []
    for target in assignment.targets:
        versions = []
        for owner, code in [*sources.items(), *students.items()]:
            text = code.get(target.exercise)
            found = version(owner, text, target.name, source=owner in sources) if text is not None else None
            if found is not None and found.grams:
                versions.append(found)
        stub = version("stub", stubs.get(target.exercise, ""), target.name)
        pairs += compare(versions, set(stub.grams) if stub else set(), target.qualname, threshold)
    pairs.sort(key=lambda p: (-p.similarity, p.target, p.a.owner, p.b.owner))
    return Report(pairs, len(students), list(sources), len(assignment.targets), threshold)


def render(report: Report, assignment: Assignment, links: dict[str, str], most: int = MOST) -> str:
    """The page: pairs ranked, each with both versions side by side and the matched lines marked."""
    from .report import _env

    return _env.get_template("similarity.html").render(report=report, pairs=report.pairs[:most], most=most,
                                                       assignment=assignment, links=links)
