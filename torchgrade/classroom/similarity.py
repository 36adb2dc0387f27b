"""Similarity: which students handed in the same code (`torchgrade similarity OUT`), through its disguises.

Two measures (docs/class-grading.md defines both):

- **Target similarity** (0 to 1): for one target, how much of two versions' normalised structure they share.
  A version is the target's definition in the student's module (the last one, as Python keeps it) together
  with the module-level helpers it calls (and the ones they call), so code moved into or out of a helper
  stays compared. Each statement becomes a word sequence from its syntax tree, so that formatting,
  comments, docstrings and parentheses vanish, with every local name (variables, arguments, helpers, at
  any scope) one word `v` (renaming changes nothing); library, builtin and target names and attributes
  stay. Operands of commutative operators and of `==`/`!=` are put in one order, `a > b` is written
  `b < a`, `a += b` is `a = a + b`, `for`, `while` and comprehensions are one kind of loop and a loop's
  `out.append(x)` is a comprehension's element `x`. The fingerprints are runs of K words inside one
  statement (a whole statement where it is shorter), so reordering independent statements changes
  nothing. Similarity is the Jaccard index of two versions' fingerprint sets after the stub's own
  fingerprints for that target are taken out (untouched stubs are not a pair).
- **Pair evidence**: for a pair of people, the sum over targets of their target similarity weighted by the
  rarity of what they share: the mean over their shared fingerprints of log((N+1)/df) / log(N+1), where df
  counts the N versions of that target that hold the fingerprint. Code every correct student writes alike
  weighs nearly nothing; a rare copy nearly its whole similarity.

The reference and an optional folder of known solutions are compared with every student too (not with each
other). The counts are numpy matrix products per target, over the fingerprints two versions share; the
students' modules are read in one worker process per core from POOL_FROM students on.

Why not copydetect (a kept library: pygments tokens, winnowing): it compares whole files, while a copy is
judged per target and with the helpers that target calls, which needs the syntax tree anyway; on the tree
no reformatting can change a word. benchmarks/copydetect_comparison.py measures both on the same code.
"""

from __future__ import annotations

import ast
import builtins
import functools
import math
import os
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from torchgrade.engine.config import Assignment

#: The page `torchgrade similarity` writes into the output folder (index.html links to it).
PAGE = "similarity.html"
#: Where `torchgrade grade` keeps each student's code: DIR/<student>/instructor/CODE_FOLDER/<module>.py.
CODE_FOLDER = "code"
#: Words per fingerprint (shorter runs match by chance in any two statements).
K = 6
#: (target, pair) rows below this similarity are not listed (the page says so).
THRESHOLD = 0.6
#: The pairs whose code the page shows side by side, and the most targets shown so in all (every pair is in
#: the page's table; --json gives every row).
MOST = 200
BLOCKS = 400
_BUILTINS = frozenset(dir(builtins))
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_COMMUTATIVE = (ast.Add, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
_SYMMETRIC = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
_MIRROR = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}
_SILENT = (ast.Load, ast.Store, ast.Del)


class SimilarityError(Exception):
    """The folder holds no code to compare (one line saying why)."""


@dataclass
class Version:
    """One person's code for one target (with its helpers): its definitions' lines, and its fingerprints
    with the lines each comes from."""

    owner: str
    source: bool  # the reference or a known solution, not a student
    spans: list[tuple[int, list[str]]]  # (first line in the module, lines) of the target and each helper
    grams: frozenset[int] = frozenset()
    where: dict[int, set[int]] = field(default_factory=dict)  # fingerprint: module lines it comes from


class _Words:
    """The word sequences (units) of a definition: one per simple statement, loop header, loop element."""

    def __init__(self, kept: set[str]):
        self.kept = kept
        self.units: list[tuple[list[str], range]] = []
        self.names: set[str] = set()  # the other names read (helpers among them)

    # -- expressions -------------------------------------------------------------------------------------------
    def expr(self, node: ast.AST, context: str, lines: range) -> list[str]:
        kind = type(node)
        if kind in _SILENT:
            return []
        if kind is ast.Name:
            if node.id in self.kept:
                return [node.id]
            self.names.add(node.id)
            return ["v"]
        if kind is ast.arg:
            return ["v"]
        if kind is ast.Attribute:
            return ["Attribute", *self.expr(node.value, context, lines), "." + node.attr]
        if kind is ast.Constant:
            value = node.value
            return [repr(value) if isinstance(value, (int, float, bool, type(None))) else type(value).__name__]
        if kind is ast.BinOp:
            a, b = self.expr(node.left, context, lines), self.expr(node.right, context, lines)
            if isinstance(node.op, _COMMUTATIVE):
                a, b = sorted((a, b))
            return ["BinOp", type(node.op).__name__, *a, *b]
        if kind is ast.BoolOp:
            return ["BoolOp", type(node.op).__name__, *(w for v in sorted(self.expr(v, context, lines)
                                                                           for v in node.values) for w in v)]
        if kind is ast.Compare:
            ops = [type(o) for o in node.ops]
            operands = [node.left, *node.comparators]
            if all(o in _MIRROR for o in ops):  # a > b > c is c < b < a
                ops, operands = [_MIRROR[o] for o in reversed(ops)], operands[::-1]
            words = [self.expr(o, context, lines) for o in operands]
            if len(ops) == 1 and ops[0] in _SYMMETRIC:
                words.sort()
            return ["Compare", *(o.__name__ for o in ops), *(w for ws in words for w in ws)]
        if kind is ast.Call:
            keywords = sorted((k.arg or "**", self.expr(k.value, context, lines)) for k in node.keywords)
            return ["Call", *self.expr(node.func, context, lines), *(w for a in node.args for w in self.expr(a, context, lines)),
                    *(w for name, value in keywords for w in ("kw", name, *value))]
        if kind in _COMPREHENSIONS:
            inner = f"{context}>Loop"
            for g in node.generators:
                self.unit(["Loop", *self.expr(g.target, inner, lines), *self.expr(g.iter, inner, lines)], inner, lines)
                for test in g.ifs:
                    self.unit(["If", *self.expr(test, inner, lines)], inner, lines)
            if kind is ast.DictComp:
                self.unit(["Elt", *self.expr(node.key, inner, lines), *self.expr(node.value, inner, lines)], inner, lines)
            else:
                self.unit(["Elt", *self.expr(node.elt, inner, lines)], inner, lines)
            return ["Comp"]
        if kind is ast.Lambda:
            return ["Lambda", *self.expr(node.body, context, lines)]
        words = [kind.__name__]
        for name in node._fields:
            value = getattr(node, name, None)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    words += self.expr(child, context, lines)
        return words

    # -- statements --------------------------------------------------------------------------------------------
    def unit(self, words: list[str], context: str, lines: range) -> None:
        self.units.append(([context.rsplit(">", 1)[-1], *words], lines))

    def body(self, statements: list[ast.stmt], context: str) -> None:
        for s in statements:
            self.statement(s, context)

    def statement(self, node: ast.stmt, context: str) -> None:
        kind = type(node)
        lines = range(node.lineno, (getattr(node, "end_lineno", None) or node.lineno) + 1)
        head = range(node.lineno, node.lineno + 1)
        if kind is ast.Expr and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or a string left as a comment
        if kind in _DEFS:
            if kind is ast.ClassDef:
                self.unit(["Class", *(w for b in node.bases for w in self.expr(b, context, head))], context, head)
            else:
                args = node.args
                self.unit(["Def", str(len(args.posonlyargs) + len(args.args)), str(len(args.kwonlyargs)),
                           *(w for d in [*args.defaults, *filter(None, args.kw_defaults)] for w in self.expr(d, context, head)),
                           "*" if args.vararg else "", "**" if args.kwarg else ""], context, head)
            self.body(node.body, f"{context}>Def")
            return
        if kind in _LOOPS:
            inner = f"{context}>Loop"
            if kind is ast.While:
                self.unit(["Loop", *self.expr(node.test, inner, head)], inner, head)
            else:
                self.unit(["Loop", *self.expr(node.target, inner, head), *self.expr(node.iter, inner, head)], inner, head)
            self.body(node.body, inner)
            self.body(node.orelse, context)
            return
        if kind is ast.If:
            self.unit(["If", *self.expr(node.test, context, head)], context, head)
            self.body(node.body, f"{context}>If")
            self.body(node.orelse, f"{context}>If")
            return
        if kind in (ast.With, ast.AsyncWith):
            self.unit(["With", *(w for item in node.items for w in self.expr(item, context, head))], context, head)
            self.body(node.body, context)
            return
        if kind is ast.Try or type(node).__name__ == "TryStar":
            self.body(node.body, context)
            for handler in node.handlers:
                self.unit(["Except", *(self.expr(handler.type, context, head) if handler.type else [])], context,
                          range(handler.lineno, handler.lineno + 1))
                self.body(handler.body, f"{context}>Except")
            self.body(node.orelse, context)
            self.body(node.finalbody, context)
            return
        if kind is ast.Expr and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) \
                and node.value.func.attr == "append" and len(node.value.args) == 1 and context.endswith("Loop"):
            self.unit(["Elt", *self.expr(node.value.args[0], context, lines)], context, lines)  # a comprehension's
            return
        if kind is ast.AugAssign:  # a += b is a = a + b
            target = self.expr(node.target, context, lines)
            a, b = target, self.expr(node.value, context, lines)
            if isinstance(node.op, _COMMUTATIVE):
                a, b = sorted((a, b))
            self.unit(["Assign", *target, "BinOp", type(node.op).__name__, *a, *b], context, lines)
            return
        self.unit(self.expr(node, context, lines), context, lines)


_IDS: dict[str, int] = {}


def _stable(word: str) -> int:
    """The word as a number that is the same in every process (crc32, not Python's salted str hash)."""
    i = _IDS.get(word)
    if i is None:
        i = _IDS[word] = zlib.crc32(word.encode("utf-8", "replace"))
    return i


def _fingerprints(units: list[tuple[list[str], range]]) -> dict[int, set[int]]:
    """Each run of K words inside one unit (the whole unit where shorter): its hash and the lines it covers.
    A tuple of ints hashes alike in every process (crc32, not Python's salted str hash)."""
    found: dict[int, set[int]] = {}
    for words, lines in units:
        ids = [_IDS.get(w) or _stable(w) for w in words if w]
        for i in range(max(1, len(ids) - K + 1)):
            found.setdefault(hash(tuple(ids[i:i + K])), set()).update(lines)
    return found


def _top(tree: ast.Module) -> dict[str, ast.AST]:
    """The module's (last) top-level definition of each name: a def, a class, or an assignment (`view = ...`)."""
    top: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, _DEFS):
            top[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    top[t.id] = node
    return top


def _kept(tree: ast.Module, targets: set[str]) -> set[str]:
    """The names that stay words: builtins, the targets' names (a contract) and what the module imports."""
    imported = {a.asname or a.name.split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    return set(_BUILTINS) | targets | imported


def _span(node: ast.AST) -> tuple[int, int]:
    first, last = node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno
    if getattr(node, "decorator_list", None):
        first = min(first, *(d.lineno for d in node.decorator_list))
    return first, last


def _version(owner: str, lines: list[str], top: dict[str, ast.AST], name: str, targets: set[str], kept: set[str],
             source: bool) -> Version | None:
    """`name`'s version: its definition and the module-level functions and classes it calls (and those call),
    other targets left out (each is compared on its own). The names a definition reads are gathered as its
    words are made, so the tree is walked once."""
    words = _Words(kept)
    nodes, seen, pending = [], {name}, [name]
    while pending:
        node = top[pending.pop()]
        nodes.append(node)
        words.statement(node, "")
        for helper in sorted(words.names - seen):
            seen.add(helper)
            if helper not in targets and isinstance(top.get(helper), _DEFS):
                pending.append(helper)
    where = _fingerprints(words.units)
    if not where:
        return None
    spans = []
    for node in sorted(nodes, key=lambda n: n.lineno):
        first, last = _span(node)
        spans.append((first, lines[first - 1:last]))
    return Version(owner, source, spans, frozenset(where), where)


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
        except (SyntaxError, ValueError, RecursionError):
            continue
        names = {n for e, n in targets if e == exercise}
        top, kept, lines = _top(tree), _kept(tree, names), text.splitlines()
        for name in sorted(names):
            if name in top:
                v = _version(owner, lines, top, name, names, kept, source)
                if v is not None:
                    found.append((f"{exercise}.{name}", v))
    return found


def version(owner: str, text: str, target: str, *, source: bool = False, exercise: str = "m",
            targets: tuple[str, ...] = ()) -> Version | None:
    """`owner`'s code for `target` (with its helpers) in a module's text (None where the module does not
    parse or lacks it); `targets`: the module's other targets (not counted as helpers)."""
    found = versions_of(owner, {exercise: text}, [(exercise, t) for t in {target, *targets}], source)
    return next((v for name, v in found if name == f"{exercise}.{target}"), None)


@dataclass(frozen=True)
class Pair:
    """Two versions of one target that share much of their code."""

    target: str
    a: Version
    b: Version
    similarity: float

    def side(self, which: str) -> list[tuple[int, str, bool]]:
        """(line number, text, matched) for each line of one side's version (target and helpers)."""
        mine, other = (self.a, self.b) if which == "a" else (self.b, self.a)
        matched = {line for g in mine.grams & other.grams for line in mine.where.get(g, ())}
        return [(first + i, text, first + i in matched) for first, lines in mine.spans for i, text in enumerate(lines)]


@dataclass
class Compared:
    """One target's comparison: every pair of versions (i < j) at or above the threshold, and each pair's
    rarity-weighted similarity (for the evidence), as index arrays into `versions`."""

    target: str
    versions: list[Version]
    rows: Any  # numpy arrays: the rows at or above the threshold (i, j, similarity), the most similar first
    cols: Any
    similarity: Any
    weighted: Any  # similarity x rarity of the shared fingerprints, for every pair (i, j) that shares any
    weighted_rows: Any
    weighted_cols: Any

    def pairs(self) -> list[Pair]:
        out = []
        for i, j, s in zip(self.rows.tolist(), self.cols.tolist(), self.similarity.tolist()):
            a, b = (self.versions[i], self.versions[j]) if not self.versions[i].source else (self.versions[j], self.versions[i])
            out.append(Pair(self.target, a, b, float(s)))
        return out


def measure(versions: list[Version], boilerplate: set[int], target: str, threshold: float = THRESHOLD) -> Compared:
    """Target similarity of every pair of `versions` (sources are not compared with each other), the
    boilerplate's fingerprints left out; the rows at or above `threshold`, and every sharing pair's weight."""
    import numpy as np

    sets = [v.grams - boilerplate for v in versions]
    empty = np.zeros(0, dtype=np.int64)
    nothing = Compared(target, versions, empty, empty, np.zeros(0), np.zeros(0), empty, empty)
    if len(versions) < 2:
        return nothing
    counts: dict[int, int] = {}
    for grams in sets:
        for g in grams:
            counts[g] = counts.get(g, 0) + 1
    # Only fingerprints two versions share can meet in a pair: the matrix holds those, the sizes count them all.
    vocabulary = {g: i for i, g in enumerate(g for g, n in counts.items() if n > 1)}
    if not vocabulary:
        return nothing
    matrix = np.zeros((len(versions), len(vocabulary)), dtype=np.float32)
    for row, grams in enumerate(sets):
        matrix[row, [vocabulary[g] for g in grams if g in vocabulary]] = 1.0
    n = len(versions)
    df = np.zeros(len(vocabulary), dtype=np.float32)
    for g, i in vocabulary.items():
        df[i] = counts[g]
    rarity = np.log((n + 1) / df) / math.log(n + 1)  # 1 - log(df)/log(n+1): near 1 for two of many, 0 for all
    shared = matrix @ matrix.T
    rare = (matrix * rarity) @ matrix.T
    sizes = np.array([len(grams) for grams in sets], dtype=np.float32)
    union = sizes[:, None] + sizes[None, :] - shared
    with np.errstate(divide="ignore", invalid="ignore"):
        jaccard = np.where(union > 0, shared / union, 0.0)
        weight = np.where(shared > 0, rare / shared, 0.0)
    sources = np.array([v.source for v in versions])
    allowed = np.triu(np.ones((n, n), dtype=bool), k=1) & ~(sources[:, None] & sources[None, :])
    rows, cols = np.nonzero(allowed & (jaccard >= threshold) & (shared > 0))
    order = np.argsort(-jaccard[rows, cols], kind="stable")
    rows, cols = rows[order], cols[order]
    wr, wc = np.nonzero(allowed & (shared > 0))
    return Compared(target, versions, rows, cols, jaccard[rows, cols].astype(float), (jaccard * weight)[wr, wc].astype(float),
                    wr, wc)


def compare(versions: list[Version], boilerplate: set[int], target: str, threshold: float = THRESHOLD
            ) -> tuple[list[Pair], int]:
    """The pairs of versions of `target` at or above `threshold`, the most similar first, and their count."""
    found = measure(versions, boilerplate, target, threshold)
    return found.pairs(), len(found.rows)


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


class Ranked:
    """A pair of people with at least one target at or above the threshold: their evidence, how many targets,
    and those targets (`matches`, the most similar first; made when asked: a class of copies has millions)."""

    def __init__(self, a: str, b: str, source: bool, evidence: float, count: int, make: Callable[[], list[Pair]]):
        self.a, self.b, self.source, self.evidence, self.count, self._make = a, b, source, evidence, count, make

    @functools.cached_property
    def matches(self) -> list[Pair]:
        return self._make()

    def __repr__(self) -> str:
        return f"Ranked({self.a!r}, {self.b!r}, evidence={self.evidence}, targets={self.count})"


@dataclass
class Report:
    pairs: list[Ranked]  # every pair with a target at or above the threshold, by evidence
    evidence: dict[tuple[str, str], float]  # every pair that shares anything (a < b by name)
    students: int
    sources: list[str]
    targets: int
    threshold: float
    #: Every (target, pair) row at or above the threshold: numpy arrays of target index, first and second
    #: person's index, similarity; `names` and `target_names` name the indices.
    table: tuple = ()
    names: list[str] = field(default_factory=list)
    target_names: list[str] = field(default_factory=list)

    @property
    def student_pairs(self) -> int:
        return sum(1 for p in self.pairs if not p.source)

    @property
    def count(self) -> int:
        return len(self.table[0]) if self.table else 0

    @property
    def rows(self) -> list[tuple[str, str, str, float]]:
        """(target, a, b, similarity) for every row at or above the threshold, the most similar first."""
        if not self.table:
            return []
        t, a, b, s = self.table
        found = [(self.target_names[ti], self.names[ai], self.names[bi], float(si))
                 for ti, ai, bi, si in zip(t.tolist(), a.tolist(), b.tolist(), s.tolist())]
        return sorted(found, key=lambda r: (-r[3], r[0], r[1], r[2]))


#: From this many students on, the code is read in worker processes (one per core).
POOL_FROM = 40


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def analyse(students: dict[str, dict[str, str]], assignment: Assignment, sources: dict[str, dict[str, str]],
            threshold: float = THRESHOLD) -> Report:
    """Every (target, pair) row at or above `threshold`, and every pair of people ranked by evidence."""
    import numpy as np

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
    people = [o for o, _, _ in owners]  # sources first: in a pair with a source, the source has the lower index
    index = {o: i for i, o in enumerate(people)}
    n = len(people)
    weights = np.zeros((n, n))
    columns: list[list] = [[], [], [], []]  # target, lower index, higher index, similarity
    target_names = [t.qualname for t in assignment.targets]
    compared: list[Compared] = []
    for ti, t in enumerate(assignment.targets):
        stub = stubs.get(t.qualname)
        versions = by_target.get(t.qualname, [])
        c = measure(versions, set(stub.grams) if stub else set(), t.qualname, threshold)
        compared.append(c)
        where = np.array([index[v.owner] for v in versions], dtype=np.int64)
        if len(c.weighted):
            np.add.at(weights, (where[c.weighted_rows], where[c.weighted_cols]), c.weighted)
        if len(c.rows):
            i, j = where[c.rows], where[c.cols]
            for column, values in zip(columns, (np.full(len(i), ti), np.minimum(i, j), np.maximum(i, j), c.similarity)):
                column.append(values)
    weights = weights + weights.T
    lo, hi = np.nonzero(np.triu(weights, k=1))
    evidence = {_key(people[a], people[b]): round(float(weights[a, b]), 4) for a, b in zip(lo.tolist(), hi.tolist())}
    if not columns[0]:
        return Report([], evidence, len(students), list(sources), len(target_names), threshold, (), people, target_names)
    table = tuple(np.concatenate(column) for column in columns)
    t_index, low, high, similarity = table
    keys, inverse, counts = np.unique(low * n + high, return_inverse=True, return_counts=True)
    keys_lo, keys_hi = keys // n, keys % n
    pair_evidence = weights[keys_lo, keys_hi]
    by_pair = np.argsort(inverse, kind="stable")  # the rows of each pair together, pair by pair
    starts = np.concatenate(([0], np.cumsum(counts)))

    held: dict[int, dict[int, Version]] = {}  # target: person's index: version (made when a page asks)

    def make(k: int) -> Callable[[], list[Pair]]:
        def matches() -> list[Pair]:
            found = []
            for row in by_pair[starts[k]:starts[k + 1]].tolist():
                c = compared[int(t_index[row])]
                mine = held.setdefault(int(t_index[row]), {index[v.owner]: v for v in c.versions})
                a, b = mine[int(high[row])], mine[int(low[row])]  # the higher index is never a source
                found.append(Pair(c.target, a, b, float(similarity[row])))
            return sorted(found, key=lambda p: (-p.similarity, p.target))
        return matches

    order = np.lexsort((keys_hi, keys_lo, -counts, -pair_evidence))
    ranked = []
    for k in order.tolist():
        first, second = people[int(keys_lo[k])], people[int(keys_hi[k])]
        source = int(keys_lo[k]) < len(sources)
        a, b = (second, first) if source else (first, second)
        ranked.append(Ranked(a, b, source, round(float(pair_evidence[k]), 4), int(counts[k]), make(k)))
    return Report(ranked, evidence, len(students), list(sources), len(target_names), threshold, table, people,
                  target_names)


def as_json(report: Report) -> dict:
    """`torchgrade similarity --json`: every (target, pair) row at or above the threshold."""
    return {"pairs": [{"a": a, "b": b, "target": t, "similarity": round(s, 4)} for t, a, b, s in report.rows]}


def render(report: Report, assignment: Assignment, links: dict[str, str], most: int = MOST, blocks: int = BLOCKS) -> str:
    """The page: pairs of people ranked by evidence, each opening to its targets and the matched lines (the
    first `most` pairs open, listing their targets, with the code of `blocks` targets in all, the first pairs';
    every pair is in the table)."""
    from torchgrade.outputs.report import _env

    shown: list[int] = []  # how many of each opening pair's targets show their code
    for p in report.pairs[:most]:
        shown.append(min(p.count, blocks))
        blocks -= shown[-1]
    partial = len(shown) < len(report.pairs) or any(n < p.count for n, p in zip(shown, report.pairs))
    return _env.get_template("similarity.html").render(report=report, shown=shown, most=len(shown), partial=partial,
                                                       assignment=assignment, links=links, k=K)
