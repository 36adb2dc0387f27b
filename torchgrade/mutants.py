"""Mutants of a reference target: one small, plausible mistake each, made with Python's `ast`.

`torchgrade audit` grades each mutant against the course's checks: a mutant that keeps full marks
is a wrong variant of the reference that no check catches. The operators are the mistakes students
make with tensor code, not a generic catalogue:

- ``cmp``: a comparison moved to its boundary neighbour or negated (``<`` to ``<=`` or ``>=``,
  ``==`` to ``!=``, ``is`` to ``is not``, ``in`` to ``not in``);
- ``arith``: an arithmetic operator swapped (``+``/``-``, ``*``/``/``, ``//`` to ``/``, ``%`` to
  ``//``, ``**`` to ``*``, ``@`` to ``*``), also in ``x += ...``; a unary minus dropped;
- ``bool``: ``and``/``or`` swapped, a ``not`` dropped, ``True``/``False`` flipped;
- ``const``: an integer constant moved by one (``dim=0`` to ``dim=1``, ``-1`` to ``-2``);
- ``raise``: a ``raise`` (so ``if ...: raise``, the validation) or an ``assert`` removed;
- ``branch``: a case handled early forgotten (``if ...: return ...`` with no ``else`` removed);
- ``default``: a default argument of the target's signature changed (a number by one, a bool flipped);
- ``call``: a call dropped (``x.clone()`` to ``x``: ``clone``, ``contiguous``, ``detach``; ``x.to(device)``
  to ``x``: ``to``, ``cuda``, ``cpu``, ``float``, ...; a layer the forward pass forgets,
  ``self.act(h)`` to ``h``; another function of the exercise not called, ``shard(batch, r, n)`` to
  ``batch``), swapped
  for its usual confusion (``sum``/``mean``, ``max``/``min``, ``zeros`` to ``empty``, ...), made
  out of place (``x.add_(y)`` to ``x.add(y)``), or a keyword such as ``device=`` or ``dtype=`` dropped;
- ``inplace``: an argument changed in place (``x * m`` to ``x.mul_(m)`` where ``x`` is a parameter);
- ``detach``: a parameter detached from the graph (``x * m`` to ``x.detach() * m``).

What is mutated is the target's code: between its ``# BEGIN SOLUTION`` / ``# END SOLUTION`` markers
where it has them (its whole body otherwise), its signature's defaults, and the private helpers it
calls (module-level names starting with ``_``, transitively), since a student writes those too.

Why not a mutation library: mutmut (3.x) and cosmic-ray (8.x), the maintained ones, each own the
loop: mutmut rewrites a whole project with trampolines and runs pytest itself; cosmic-ray keeps a
session database, writes each mutant to disk and runs a test command, its operators working on
parso trees inside that loop (and it brings sqlalchemy, gitpython and more). mutatest has had no
release since 2022. None offers the operators tensor code needs (``clone`` dropped, ``sum``/``mean``,
``device=`` dropped, an input changed in place), so the generic half would come from a library
and the half that matters from here anyway; ``ast`` plus source positions does both.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from .authoring import BEGIN, END

OPERATORS = ("cmp", "arith", "bool", "const", "raise", "branch", "default", "call", "inplace", "detach")

_CMP = {ast.Lt: (ast.LtE, ast.GtE), ast.LtE: (ast.Lt, ast.Gt), ast.Gt: (ast.GtE, ast.LtE),
        ast.GtE: (ast.Gt, ast.Lt), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.Is: (ast.IsNot,),
        ast.IsNot: (ast.Is,), ast.In: (ast.NotIn,), ast.NotIn: (ast.In,)}
_ARITH = {ast.Add: (ast.Sub,), ast.Sub: (ast.Add,), ast.Mult: (ast.Div,), ast.Div: (ast.Mult,),
          ast.FloorDiv: (ast.Div,), ast.Mod: (ast.FloorDiv,), ast.Pow: (ast.Mult,), ast.MatMult: (ast.Mult,)}
#: Calls whose result is their receiver's value (dropping them leaves the receiver).
_DROP = {"clone", "contiguous", "detach"}
#: Conversions whose dropping leaves the receiver where it was (`x.to(device)`: `x`).
_DROP_WITH_ARGUMENTS = {"to", "cuda", "cpu", "type_as", "float", "double", "long"}
#: The usual confusions, as calls (function or method names).
_SWAP = {"sum": "mean", "mean": "sum", "max": "min", "min": "max", "amax": "amin", "amin": "amax",
         "argmax": "argmin", "argmin": "argmax", "zeros": "empty", "zeros_like": "empty_like",
         "ones": "zeros", "ones_like": "zeros_like", "floor": "ceil", "ceil": "floor", "any": "all",
         "all": "any", "new_zeros": "new_empty", "full": "empty", "full_like": "empty_like"}
_KEYWORDS = {"device", "dtype", "keepdim", "requires_grad", "accumulate", "non_blocking", "inplace", "bias"}
_PRECEDENCE = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.FloorDiv: 2, ast.Mod: 2, ast.MatMult: 2, ast.Pow: 3}
_INPLACE = {ast.Add: "add_", ast.Sub: "sub_", ast.Mult: "mul_", ast.Div: "div_"}
_INPLACE_METHOD = re.compile(r"^[a-z][a-z0-9_]*[a-z0-9]_$")


@dataclass(frozen=True)
class Mutant:
    """One mutant of a target: the whole mutated module's source, and where and how it differs."""

    target: str  # exercise.target
    operator: str
    file: str  # the reference file's name, as reports show it
    line: int
    before: str  # the changed line as it was (stripped)
    after: str  # as the mutant has it (stripped; its first line)
    source: str
    id: str = ""

    @property
    def diff(self) -> str:
        """The mutant as one line: ``file:line: before  →  after``."""
        return f"{self.file}:{self.line}: {self.before}  →  {self.after}"


def _marked_lines(lines: list[str]) -> list[tuple[int, int]]:
    """The 1-based line ranges strictly between each BEGIN/END SOLUTION marker pair."""
    ranges, start = [], None
    for number, line in enumerate(lines, 1):
        if line.strip() == BEGIN:
            start = number
        elif line.strip() == END and start is not None:
            ranges.append((start + 1, number - 1))
            start = None
    return ranges


def _body_lines(node: ast.AST) -> set[int]:
    """The lines of a def/class body, its docstring left out."""
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return {n for stmt in body for n in range(stmt.lineno, stmt.end_lineno + 1)}


def _names_used(tree_nodes: list[ast.AST], lines: set[int]) -> set[str]:
    return {n.id for node in tree_nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and getattr(n, "lineno", 0) in lines}


def regions(tree: ast.Module, source_lines: list[str], name: str) -> tuple[set[int], list[ast.AST], set[str], set[int]]:
    """What may be mutated for target `name`: the lines, the signatures whose defaults may change,
    the target's parameter names and its own lines (helpers left out). KeyError if the module does
    not define `name`."""
    top = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    node = top[name]
    marked = _marked_lines(source_lines)
    span = range(node.lineno, node.end_lineno + 1)
    own = {n for a, b in marked if a in span for n in range(a, b + 1)} or _body_lines(node)
    lines = set(own)
    functions = [node] if not isinstance(node, ast.ClassDef) else \
        [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    params = {a.arg for f in functions for a in [*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs,
                                                  *filter(None, [f.args.vararg, f.args.kwarg])]} - {"self", "cls", "ctx"}
    seen = {name}
    pending = _names_used([node], own)
    while pending:  # private helpers the target calls, and the ones they call
        helper = pending.pop()
        if helper in seen or not helper.startswith("_") or helper not in top:
            continue
        seen.add(helper)
        body = _body_lines(top[helper])
        lines |= body
        pending |= _names_used([top[helper]], body)
    return lines, functions, params, own


class _Maker:
    def __init__(self, source: str, file: str, target: str, lines: set[int], signatures: list[ast.AST],
                 params: set[str]):
        self.source = source
        self.raw = source.encode("utf-8").splitlines(keepends=True)
        self.file, self.target, self.lines, self.params = file, target, lines, params
        self.signatures = signatures
        self.own: set[int] = set()  # the target's own lines (its parameters are only its own there)
        self.mutants: list[Mutant] = []
        self.siblings: set[str] = set()  # the module's public functions and classes (the exercise's targets)

    def inside(self, node: ast.AST) -> bool:
        return all(n in self.lines for n in range(node.lineno, node.end_lineno + 1))

    def add(self, operator: str, node: ast.AST, replacement: str | ast.AST, wrap: bool = False) -> None:
        text = ast.unparse(replacement) if isinstance(replacement, ast.AST) else replacement
        if wrap:
            text = f"({text})"
        raw = self.raw
        first, last = node.lineno - 1, node.end_lineno - 1
        head = raw[first][:node.col_offset]
        tail = raw[last][node.end_col_offset:]
        new = raw[:first] + [head + text.encode("utf-8") + tail] + raw[last + 1:]
        source = b"".join(new).decode("utf-8")
        before = raw[first].decode("utf-8").strip()
        after = (head + text.encode("utf-8") + tail).decode("utf-8").strip().splitlines()[0]
        if before == after:
            return
        self.mutants.append(Mutant(self.target, operator, self.file, node.lineno, before, after, source))

    def visit(self, tree: ast.Module) -> None:
        self.parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        messages = {n for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for n in ast.walk(node)}
        for node in ast.walk(tree):
            # an error message's wording is not graded (checks compare exception types): not mutated
            if not hasattr(node, "lineno") or not self.inside(node) or node in messages:
                continue
            self.expression(node)
        for function in self.signatures:
            self.defaults(function)

    def expression(self, node: ast.AST) -> None:
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                for other in _CMP.get(type(op), ()):
                    new = copy.deepcopy(node)
                    new.ops[i] = other()
                    self.add("cmp", node, new)
        elif isinstance(node, ast.BinOp):
            for other in _ARITH.get(type(node.op), ()):
                new = copy.deepcopy(node)
                new.op = other()
                # parentheses only where the new operator binds differently (`c - a * b`: `c - (a + b)`)
                self.add("arith", node, new, wrap=_PRECEDENCE.get(other) != _PRECEDENCE.get(type(node.op)))
            if type(node.op) in _INPLACE and isinstance(node.left, ast.Name) and node.left.id in self.params \
                    and node.lineno in self.own:
                call = ast.Call(ast.Attribute(node.left, _INPLACE[type(node.op)], ast.Load()), [node.right], [])
                self.add("inplace", node, call)
            for side in ("left", "right"):
                operand = getattr(node, side)
                if isinstance(operand, ast.Name) and operand.id in self.params and node.lineno in self.own:
                    self.add("detach", operand, f"{operand.id}.detach()")
        elif isinstance(node, ast.AugAssign):
            for other in _ARITH.get(type(node.op), ()):
                new = copy.deepcopy(node)
                new.op = other()
                self.add("arith", node, new)
        elif isinstance(node, ast.UnaryOp):
            if isinstance(node.op, (ast.Not, ast.USub)) and not isinstance(node.operand, ast.Constant):
                self.add("bool" if isinstance(node.op, ast.Not) else "arith", node, node.operand, wrap=True)
        elif isinstance(node, ast.BoolOp):
            new = copy.deepcopy(node)
            new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self.add("bool", node, new, wrap=True)
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                self.add("bool", node, repr(not node.value))
            elif isinstance(node.value, int):
                parent = self.parents.get(node)
                tight = isinstance(parent, ast.Attribute) or (isinstance(parent, ast.BinOp) and
                                                             isinstance(parent.op, ast.Pow) and parent.left is node)
                for value in (node.value + 1, node.value - 1):
                    self.add("const", node, f"({value})" if value < 0 and tight else repr(value))
        elif isinstance(node, (ast.Raise, ast.Assert)):
            self.add("raise", node, "pass")
        elif isinstance(node, ast.If) and not node.orelse and isinstance(node.body[-1], ast.Return):  # (`raise`: above)
            self.add("branch", node, "pass")  # a case handled early (`if isinstance(obj, dict): return ...`) forgotten
        elif isinstance(node, ast.Call):
            self.call(node)

    def call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name is None:
            return
        if isinstance(func, ast.Attribute) and name in _DROP and not node.args and not node.keywords \
                or isinstance(func, ast.Attribute) and name in _DROP_WITH_ARGUMENTS:
            self.add("call", node, func.value)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and len(node.args) == 1 and not isinstance(node.args[0], ast.Starred) and not node.keywords:
            self.add("call", node, node.args[0])  # a layer (or transform) the forward pass forgets: self.act(h) -> h
        if isinstance(func, ast.Name) and name in self.siblings and node.args \
                and not isinstance(node.args[0], ast.Starred):
            self.add("call", node, node.args[0])  # another function of the exercise not called: shard(batch, ...) -> batch
        if name in _SWAP:
            new = copy.deepcopy(node)
            if isinstance(new.func, ast.Attribute):
                new.func.attr = _SWAP[name]
            else:
                new.func.id = _SWAP[name]
            self.add("call", node, new)
        if isinstance(func, ast.Attribute) and _INPLACE_METHOD.match(name) and not name.startswith("_"):
            new = copy.deepcopy(node)
            new.func.attr = name[:-1]
            self.add("call", node, new)
        for i, keyword in enumerate(node.keywords):
            if keyword.arg in _KEYWORDS:
                new = copy.deepcopy(node)
                del new.keywords[i]
                self.add("call", node, new)

    def defaults(self, function: ast.AST) -> None:
        for default in [*function.args.defaults, *(d for d in function.args.kw_defaults if d is not None)]:
            if not isinstance(default, ast.Constant) and not (
                    isinstance(default, ast.UnaryOp) and isinstance(default.op, ast.USub)
                    and isinstance(default.operand, ast.Constant)):
                continue
            value = ast.literal_eval(default)
            if isinstance(value, bool):
                changed = [not value]
            elif isinstance(value, int):
                changed = [value + 1, value - 1]
            elif isinstance(value, float):
                changed = [value * 2 if value else 1.0]
            else:
                continue
            for other in changed:
                self.add("default", default, repr(other))


def _stable_id(mutant: Mutant, occurrence: int) -> str:
    """An id that stays the same while the changed line and the change stay the same (lines may move)."""
    text = f"{mutant.target}\0{mutant.operator}\0{mutant.before}\0{mutant.after}\0{occurrence}"
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def make_mutants(path: Path, exercise: str, name: str) -> list[Mutant]:
    """Every mutant of target `name` of the reference module at `path`, in source order, each with a
    stable id. KeyError if the module does not define `name`; SyntaxError if it does not parse."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    lines, signatures, params, own = regions(tree, source.splitlines(), name)
    maker = _Maker(source, path.name, f"{exercise}.{name}", lines, signatures, params)
    maker.own = own
    maker.siblings = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                      and not n.name.startswith("_")}
    maker.visit(tree)
    unique: dict[str, Mutant] = {}
    programs = {source}
    for m in sorted(maker.mutants, key=lambda m: (m.line, m.operator, m.after)):
        if m.source in programs:
            continue  # the same program twice (two operators, one result) is one mutant
        programs.add(m.source)
        try:
            ast.parse(m.source)
        except SyntaxError:  # a change the text around it does not take: not a program a student could write
            continue
        occurrence = sum(1 for u in unique.values() if (u.operator, u.before, u.after) == (m.operator, m.before, m.after))
        ident = _stable_id(m, occurrence)
        unique[ident] = Mutant(**{**m.__dict__, "id": ident})
    return list(unique.values())
