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
import os
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from torchgrade.engine.config import Assignment

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
    grams: frozenset[int] = frozenset()  # the hashes of its runs of K words


def _definition(tree: ast.Module, name: str) -> ast.AST | None:
    """The module's (last) top-level definition of `name`: a def, a class, or an assignment (`view = ...`)."""
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            found = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node
    return found


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: Node kinds that say nothing a student chose (every name has one).
_SILENT = (ast.Load, ast.Store, ast.Del)


def _tokens(node: ast.AST) -> tuple[list[str], list[int]]:
    """The node's syntax tree in order, as words and their lines: node kinds, local names by order of first
    use, kept attribute and library names, constants by kind (numbers by value); docstrings left out."""
    names: dict[str, str] = {}
    words: list[str] = []
    lines: list[int] = []
    stack = [(node, getattr(node, "lineno", 1))]
    while stack:
        n, line = stack.pop()
        kind = type(n)
        if kind in _SILENT:
            continue
        line = getattr(n, "lineno", line)
        words.append(kind.__name__)
        lines.append(line)
        word = None
        if kind is ast.Name or kind is ast.arg:
            name = n.id if kind is ast.Name else n.arg
            word = name if name in _BUILTINS else names.setdefault(name, f"v{len(names)}")
        elif kind is ast.Attribute:
            word = "." + n.attr
        elif kind is ast.Constant:
            value = n.value
            word = repr(value) if isinstance(value, (int, float, bool, type(None))) else type(value).__name__
        elif kind in _DEFS:
            word = names.setdefault(n.name, f"v{len(names)}")
        if word is not None:
            words.append(word)
            lines.append(line)
        skip = None
        if kind in _DEFS and n.body and type(n.body[0]) is ast.Expr and type(n.body[0].value) is ast.Constant \
                and isinstance(n.body[0].value.value, str):
            skip = n.body[0]  # the docstring
        children = []
        for field_name in n._fields:
            value = getattr(n, field_name, None)
            if isinstance(value, list):
                children.extend(v for v in value if isinstance(v, ast.AST) and v is not skip)
            elif isinstance(value, ast.AST):
                children.append(value)
        stack.extend((c, line) for c in reversed(children))
    return words, lines


_IDS: dict[str, int] = {}


def _ids(words: list[str]) -> list[int]:
    """Each word as a number that is the same in every process (crc32, not Python's salted str hash)."""
    out = []
    for w in words:
        i = _IDS.get(w)
        if i is None:
            i = _IDS[w] = zlib.crc32(w.encode("utf-8", "replace"))
        out.append(i)
    return out


def _grams(ids: list[int]) -> list[int]:
    """The hash of each run of K words, in order (a tuple of ints hashes alike in every process)."""
    return [hash(tuple(ids[i:i + K])) for i in range(max(0, len(ids) - K + 1))]


def _span(node: ast.AST) -> tuple[int, int]:
    first, last = node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno
    if getattr(node, "decorator_list", None):
        first = min(first, *(d.lineno for d in node.decorator_list))
    return first, last


def _version(owner: str, lines: list[str], node: ast.AST, source: bool) -> Version | None:
    first, last = _span(node)
    grams = frozenset(_grams(_ids(_tokens(node)[0])))
    return Version(owner, source, lines[first - 1:last], first, grams) if grams else None


def version(owner: str, text: str, target: str, *, source: bool = False) -> Version | None:
    """`owner`'s code for `target` in a module's text (None where the module does not parse or lacks it)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    node = _definition(tree, target)
    return _version(owner, text.splitlines(), node, source) if node is not None else None


def versions_of(owner: str, code: dict[str, str], targets: list[tuple[str, str]], source: bool = False
                ) -> list[tuple[str, Version]]:
    """(exercise.target, version) for each of `targets` (exercise, name) that `code` (module: text) defines;
    each module parsed once."""
    found = []
    for exercise in sorted({e for e, _ in targets}):
        text = code.get(exercise)
        if text is None:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        lines = text.splitlines()
        for e, name in targets:
            node = _definition(tree, name) if e == exercise else None
            v = _version(owner, lines, node, source) if node is not None else None
            if v is not None:
                found.append((f"{e}.{name}", v))
    return found


def _matched_lines(mine: Version, shared: set[int]) -> set[int]:
    """The lines of `mine` that some shared run of K words covers (the version parsed again: for the page only)."""
    try:
        node = ast.parse("\n".join(mine.lines)).body[-1]
    except (SyntaxError, ValueError, IndexError):
        return set()
    words, lines = _tokens(node)
    matched: set[int] = set()
    for i, gram in enumerate(_grams(_ids(words))):
        if gram in shared:
            matched.update(lines[i:i + K])
    return {mine.first - 1 + line for line in matched}


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
        matched = _matched_lines(mine, set(mine.grams & other.grams))
        return [(mine.first + i, text, mine.first + i in matched) for i, text in enumerate(mine.lines)]


def compare(versions: list[Version], boilerplate: set[int], target: str, threshold: float = THRESHOLD,
            most: int = MOST) -> tuple[list[Pair], int]:
    """The `most` most similar pairs of versions of `target` at or above `threshold` (sources are not compared
    with each other), with the boilerplate's K-grams left out; and how many pairs are at or above it."""
    import numpy as np

    sets = [v.grams - boilerplate for v in versions]
    if len(versions) < 2:
        return [], 0
    counts: dict[int, int] = {}
    for grams in sets:
        for g in grams:
            counts[g] = counts.get(g, 0) + 1
    # Only runs two versions share can meet in a pair: the matrix holds those, the sizes count them all.
    vocabulary = {g: i for i, g in enumerate(g for g, n in counts.items() if n > 1)}
    if not vocabulary:
        return [], 0
    matrix = np.zeros((len(versions), len(vocabulary)), dtype=np.float32)
    for row, grams in enumerate(sets):
        matrix[row, [vocabulary[g] for g in grams if g in vocabulary]] = 1.0
    shared = matrix @ matrix.T  # runs two versions have in common
    sizes = np.array([len(grams) for grams in sets], dtype=np.float32)
    union = sizes[:, None] + sizes[None, :] - shared
    with np.errstate(divide="ignore", invalid="ignore"):
        jaccard = np.where(union > 0, shared / union, 0.0)
    both_sources = np.array([v.source for v in versions])
    keep = np.triu((jaccard >= threshold) & (shared > 0), k=1) & ~(both_sources[:, None] & both_sources[None, :])
    rows, cols = np.nonzero(keep)
    order = np.argsort(-jaccard[rows, cols], kind="stable")[:most]  # a class of copies has millions of pairs
    pairs = []
    for i, j in zip(rows[order].tolist(), cols[order].tolist()):
        a, b = (versions[i], versions[j]) if not versions[i].source else (versions[j], versions[i])
        pairs.append(Pair(target, a, b, float(jaccard[i, j])))
    return pairs, int(len(rows))


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
    from torchgrade.engine.results import INSTRUCTOR_FOLDER

    code = {}
    for folder in sorted(p for p in Path(out).iterdir() if p.is_dir() and not p.name.startswith(".")):
        kept = folder / INSTRUCTOR_FOLDER / CODE_FOLDER
        if kept.is_dir():
            code[folder.name] = modules(kept, names)
    return code


@dataclass
class Report:
    pairs: list[Pair]  # the most similar (MOST at most)
    count: int  # every pair at or above the threshold
    students: int
    sources: list[str]
    targets: int
    threshold: float


#: From this many students on, the code is read in worker processes (one per core).
POOL_FROM = 40


def analyse(students: dict[str, dict[str, str]], assignment: Assignment, sources: dict[str, dict[str, str]],
            threshold: float = THRESHOLD) -> Report:
    """Every pair at or above `threshold`, target by target, the most similar first."""
    names = tuple(e.name for e in assignment.exercises)
    targets = [(t.exercise, t.name) for t in assignment.targets]
    owners = [*((o, c, True) for o, c in sources.items()), *((o, c, False) for o, c in students.items())]
    jobs = ([o for o, _, _ in owners], [c for _, c, _ in owners], [targets] * len(owners), [s for _, _, s in owners])
    if len(students) >= POOL_FROM and (os.cpu_count() or 1) > 1:
        import multiprocessing

        with ProcessPoolExecutor(os.cpu_count(), mp_context=multiprocessing.get_context("spawn")) as pool:
            found = list(pool.map(versions_of, *jobs, chunksize=8))
    else:
        found = list(map(versions_of, *jobs))
    by_target: dict[str, list[Version]] = {}
    for versions in found:
        for qualname, v in versions:
            by_target.setdefault(qualname, []).append(v)
    stubs = dict(versions_of("stub", modules(assignment.stubs_dir, names), targets))
    pairs: list[Pair] = []
    count = 0
    for t in assignment.targets:
        stub = stubs.get(t.qualname)
        found, n = compare(by_target.get(t.qualname, []), set(stub.grams) if stub else set(), t.qualname, threshold)
        pairs += found
        count += n
    pairs.sort(key=lambda p: (-p.similarity, p.target, p.a.owner, p.b.owner))
    return Report(pairs[:MOST], count, len(students), list(sources), len(assignment.targets), threshold)


def render(report: Report, assignment: Assignment, links: dict[str, str], most: int = MOST) -> str:
    """The page: pairs ranked, each with both versions side by side and the matched lines marked."""
    from torchgrade.outputs.report import _env

    return _env.get_template("similarity.html").render(report=report, pairs=report.pairs[:most], most=most,
                                                       assignment=assignment, links=links)
