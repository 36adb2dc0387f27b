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
- ``inplace``: an argument changed in place (``x * m`` to ``x.mul_(m)`` where ``x`` is a parameter), an
  out-of-place method made in place (``x.masked_fill(m, 0)`` to ``x.masked_fill_(m, 0)``, on a variable),
  an update made in place (``h = h + d`` to ``h += d``);
- ``outplace``: an in-place update made out of place (``h += d`` to ``h = h + d``; the method form,
  ``x.add_(y)`` to ``x.add(y)``, is ``call``'s);
- ``detach``: a parameter detached from the graph (``x * m`` to ``x.detach() * m``);
- ``delete``: a statement deleted (made ``pass``): an assignment that rebinds a name read afterwards (a mask
  line ``s = s.masked_fill(~m, 0)``, ``x = x.to(dtype)``), an augmented assignment, an assignment to an
  attribute or an item (``x_.grad = None``), a call made for its effect (an in-place update,
  ``p.sub_(lr * p.grad)``, ``y.backward()``); validations are ``raise``'s;
- ``negate``: a condition negated (``if cond:`` to ``if not cond:``, also ``while`` and ``a if c else b``,
  where ``cmp`` does not already negate it: a single comparison) or a mask inverted (``~mask`` to ``mask``;
  ``masked_fill(m, v)`` to ``masked_fill(~m, v)``, ``torch.where(m, a, b)`` to ``torch.where(~m, a, b)``);
- ``swap``: two adjacent positional arguments of one call swapped (``cell(x[:, t], h)`` to
  ``cell(h, x[:, t])``; not for symmetric calls such as ``add``, ``max``, and not where one is a literal),
  or a variable used for another of the same stem (``h`` for ``h0``, ``x`` for ``x_``; not where only
  its shape, dtype or device is read);
- ``bounds``: a loop bound or a slice off by one where ``const`` does not already move it (a bound that is
  not a number): ``range(n)`` to ``range(n - 1)`` or ``range(1, n)``, ``range(a, b)`` to
  ``range(a + 1, b)`` or ``range(a, b - 1)``, ``x[:k]`` to ``x[:k - 1]``, ``x[k:]`` to ``x[k + 1:]``;
- ``keyword``: any keyword argument dropped (``call`` drops ``device=``, ``dtype=``, ``keepdim=`` and the
  like; this one every other: ``dim=``, ``retain_graph=``, ``rounding_mode=``), except one given as
  ``False`` or ``None`` (PyTorch's defaults);
- ``input``: an input returned instead of the result (``return f(x)`` to ``return x``, for a parameter
  ``x`` the returned computation reads);
- ``shape``: a shape operation dropped, its receiver kept (``k.transpose(-2, -1)`` to ``k``, also ``permute``,
  ``movedim``, ``swapaxes``, ``t()`` and the ``.T``/``.mT`` properties, as methods or ``torch.`` functions): heads
  split without the transpose, a matrix product with the wrong side's layout; a check with square or
  symmetric inputs lets it through;
- ``argument``: one argument dropped from a call to another function of the exercise (or a class of it, or
  the ``forward`` of a submodule made from one: ``self.attn = Attention(...)``) where the callee has a
  default for it (``attention(q, k, v, mask)`` to ``attention(q, k, v)``; the arguments after it passed by
  name): a mask, a scale or a flag forgotten on the way down, which only a check that passes one sees;
- ``jump``: ``break`` made ``continue`` and ``continue`` made ``break`` (a validation loop that stops at the
  first bad index, or a filter that stops at the first item to skip);
- ``types``: a tuple of types narrowed in ``isinstance`` (``isinstance(v, (tuple, list))`` to
  ``isinstance(v, tuple)``): a list refused, or taken the wrong way, where PyTorch takes one;
- ``operand``: one operand of ``and``/``or`` dropped (``a or b`` to ``a`` and to ``b``): half of a
  validation's condition forgotten, which only an input that only the other half catches shows.

Kinds equivalent by construction are not made: a ``.detach()`` dropped or added inside the ``forward``
or ``backward`` of an ``autograd.Function`` (autograd is off there); ``zeros`` made ``empty`` under
``if x.numel() == 0:`` (nothing to fill); a deleted assignment whose name is never read afterwards; a
docstring or a ``pass`` deleted.

Every kind is deterministic: the same reference gives the same mutants, in the same order, with the
same ids, in every process (no set or hash order is used).

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

from torchgrade.authoring.stubs import BEGIN, END

OPERATORS = ("cmp", "arith", "bool", "const", "raise", "branch", "default", "call", "inplace", "detach",
             "outplace", "delete", "negate", "swap", "bounds", "keyword", "input", "shape", "argument", "jump",
             "types", "operand")

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
#: Tensor methods with an in-place twin (``name_``) that a student may confuse with it.
_HAS_INPLACE = {"add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "pow", "clamp", "clamp_min",
                "clamp_max", "masked_fill", "masked_scatter", "index_put", "index_add", "index_fill", "index_copy",
                "scatter", "scatter_add", "fill_diagonal", "relu", "sigmoid", "tanh", "unsqueeze", "squeeze",
                "transpose", "t", "floor", "ceil", "round", "sign", "fmod", "remainder", "lerp", "addcmul",
                "addcdiv", "reciprocal", "square", "tril", "triu", "copysign", "where", "nan_to_num"}
#: Calls whose positional arguments commute (swapping two is no mistake), or whose arguments are of
#: different kinds by construction (a type, an attribute name): no ``swap``.
_NO_SWAP = {"add", "mul", "maximum", "minimum", "max", "min", "eq", "ne", "logical_and", "logical_or",
            "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "isclose", "allclose", "equal", "hypot",
            "isinstance", "issubclass", "getattr", "hasattr", "setattr", "super", "print", "range", "zip",
            "enumerate", "promote_types", "dict", "set", "frozenset", "sorted"}
#: Where a variable of the same stem is read for its metadata only, both give the same: no ``swap``.
_METADATA = {"shape", "dtype", "device", "ndim", "size", "dim", "numel", "is_floating_point", "is_complex",
             "layout", "is_cuda"}
#: Shape operations whose dropping leaves their receiver (``x.transpose(0, 1)``: ``x``), as methods or torch functions.
_SHAPE_CALLS = {"transpose", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "t"}
_SHAPE_PROPERTIES = {"T", "mT", "H", "mH"}
#: ``zeros`` made one of these fills nothing where the tensor is empty.
_UNFILLED = {"empty", "empty_like", "new_empty"}


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
        self.tree = tree
        self.parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        messages = {n for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for n in ast.walk(node)}
        for node in ast.walk(tree):
            # an error message's wording is not graded (checks compare exception types): not mutated
            if not hasattr(node, "lineno") or not self.inside(node) or node in messages:
                continue
            self.expression(node)
            self.more(node)
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
                if isinstance(operand, ast.Name) and operand.id in self.params and node.lineno in self.own \
                        and not self.in_function_pass(node):
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

    # --- where a mutant would be equivalent by construction ---

    def function_of(self, node: ast.AST) -> ast.AST | None:
        """The innermost def around `node` (None at module level)."""
        node = self.parents.get(node)
        while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            node = self.parents.get(node)
        return node

    def in_function_pass(self, node: ast.AST) -> bool:
        """Inside the forward or backward of an ``autograd.Function`` (where autograd is off)."""
        function = self.function_of(node)
        owner = self.parents.get(function) if function is not None else None
        return isinstance(function, ast.FunctionDef) and function.name in ("forward", "backward") \
            and isinstance(owner, ast.ClassDef) and any(
                (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")) == "Function" for b in owner.bases)

    def under_empty_test(self, node: ast.AST) -> bool:
        """In the body of ``if <x>.numel() == 0:`` (a tensor with nothing to fill)."""
        child, parent = node, self.parents.get(node)
        while parent is not None:
            if isinstance(parent, ast.If) and child in parent.body:
                test = parent.test
                if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
                        and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0 \
                        and isinstance(test.left, ast.Call) and isinstance(test.left.func, ast.Attribute) \
                        and test.left.func.attr == "numel":
                    return True
            child, parent = parent, self.parents.get(parent)
        return False

    def in_raise(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, ast.stmt):
            parent = self.parents.get(parent)
        return isinstance(parent, (ast.Raise, ast.Assert))

    def scope(self, node: ast.AST) -> ast.AST:
        return self.function_of(node) or self.tree

    def bound(self, scope: ast.AST) -> list[str]:
        """The names a def binds (its parameters, then what it assigns), in source order, once each."""
        names = []
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = scope.args
            names += [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]]
        names += [n.id for n in ast.walk(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        return list(dict.fromkeys(names))

    def loops_around(self, node: ast.AST) -> list[ast.AST]:
        found, parent = [], self.parents.get(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if isinstance(parent, (ast.For, ast.While, ast.comprehension)):
                found.append(parent)
            parent = self.parents.get(parent)
        return found

    def read_after(self, stmt: ast.stmt, name: str) -> bool:
        """Whether `name` is read after `stmt` (later in its def, or anywhere in a loop around it)."""
        end = (stmt.end_lineno, stmt.end_col_offset)
        for n in ast.walk(self.scope(stmt)):
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) \
                    and (n.lineno, n.col_offset) >= end:
                return True
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                   for loop in self.loops_around(stmt) for n in ast.walk(loop))

    def bound_before(self, stmt: ast.stmt, name: str) -> bool:
        """Whether `name` has a value before `stmt` runs (a parameter, an earlier assignment, a loop around it)."""
        scope = self.scope(stmt)
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = scope.args
            if name in [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]]:
                return True
        start = (stmt.lineno, stmt.col_offset)
        if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               and (n.lineno, n.col_offset) < start for n in ast.walk(scope)):
            return True
        own = set(map(id, ast.walk(stmt)))  # (its own binding, in a loop, is not an earlier one)
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) and id(n) not in own
                   for loop in self.loops_around(stmt) for n in ast.walk(loop))

    def scalar(self, name: str, stmt: ast.stmt) -> bool:
        """Whether `name` is first bound, in the def around `stmt`, to a number (``n = 0``, ``k = len(s) - 1``)."""
        first = next((n for n in ast.walk(self.scope(stmt)) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in n.targets)), None)
        return first is not None and _number(first.value)

    def statement_of(self, node: ast.AST) -> ast.stmt | None:
        while node is not None and not isinstance(node, ast.stmt):
            node = self.parents.get(node)
        return node

    # --- the kinds added for issue 36 ---

    def more(self, node: ast.AST) -> None:
        self.issue48(node)
        if isinstance(node, ast.stmt):
            self.delete(node)
            if isinstance(node, (ast.If, ast.While)) and not all(  # (not where it only words an error message)
                    isinstance(st, (ast.Assign, ast.AugAssign)) and any(isinstance(n, ast.JoinedStr) for n in ast.walk(st))
                    for st in node.body + node.orelse):
                self.negate(node.test)
            # (on a number or a string, in place and out of place are the same: neither is made)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.BinOp) and type(node.value.op) in _INPLACE \
                    and isinstance(node.value.left, ast.Name) and node.value.left.id == node.targets[0].id \
                    and not self.scalar(node.targets[0].id, node):
                self.add("inplace", node, ast.AugAssign(node.targets[0], node.value.op, node.value.right))
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and type(node.op) in _INPLACE \
                    and not any(isinstance(n, ast.JoinedStr) for n in ast.walk(node)) \
                    and not self.scalar(node.target.id, node):
                load = ast.Name(node.target.id, ast.Load())
                self.add("outplace", node, f"{node.target.id} = {ast.unparse(ast.BinOp(load, node.op, node.value))}")
            if isinstance(node, ast.Return) and isinstance(node.value, (ast.Call, ast.BinOp)) \
                    and node.lineno in self.own:
                self.returned_input(node)
        elif isinstance(node, ast.IfExp):
            self.negate(node.test)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            self.add("negate", node, node.operand,  # ~mask dropped
                     wrap=not isinstance(node.operand, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)))
        elif isinstance(node, ast.Call) and not self.in_raise(node):
            self.call_more(node)
        elif isinstance(node, ast.Subscript):
            self.slices(node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            self.similar(node)

    # --- the kinds added for issue 48 ---

    def issue48(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Break, ast.Continue)):
            self.add("jump", node, "continue" if isinstance(node, ast.Break) else "break")
        elif isinstance(node, ast.BoolOp):
            for i in range(len(node.values)):  # one operand dropped
                rest = node.values[:i] + node.values[i + 1:]
                kept = rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest)
                self.add("operand", node, kept, wrap=isinstance(kept, (ast.IfExp, ast.Lambda, ast.NamedExpr)))
        elif isinstance(node, ast.Attribute) and node.attr in _SHAPE_PROPERTIES and isinstance(node.ctx, ast.Load) \
                and not self.in_raise(node):
            self.add("shape", node, node.value, wrap=not isinstance(node.value, _ATOMS))
        elif isinstance(node, ast.Call) and not self.in_raise(node):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _SHAPE_CALLS:
                if isinstance(func.value, ast.Name) and func.value.id == "torch":
                    if node.args and not isinstance(node.args[0], ast.Starred):
                        self.add("shape", node, node.args[0], wrap=not isinstance(node.args[0], _ATOMS))
                else:
                    self.add("shape", node, func.value, wrap=not isinstance(func.value, _ATOMS))
            if isinstance(func, ast.Name) and func.id == "isinstance" and len(node.args) == 2 \
                    and isinstance(node.args[1], ast.Tuple) and len(node.args[1].elts) >= 2:
                types = node.args[1].elts
                for i in range(len(types)):  # one type of the tuple left out
                    rest = types[:i] + types[i + 1:]
                    self.add("types", node, ast.Call(func, [node.args[0], rest[0] if len(rest) == 1
                                                            else ast.Tuple(rest, ast.Load())], []))
            self.dropped_argument(node)

    def callee(self, node: ast.Call) -> ast.arguments | None:
        """The parameters of what a call calls, where it is the exercise's own: a function of the module, a class
        of it (its ``__init__``), or ``self.<name>(...)`` where ``self.<name> = <a class of it>(...)`` (its forward)."""
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.functions:
            return self.functions[func.id].args
        if isinstance(func, ast.Name) and func.id in self.classes:
            init = self.method(self.classes[func.id], "__init__")
            return init.args if init is not None else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            owner = self.parents.get(self.function_of(node))
            for n in ast.walk(owner) if isinstance(owner, ast.ClassDef) else ():
                if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name) \
                        and n.value.func.id in self.classes and any(
                            isinstance(t, ast.Attribute) and t.attr == func.attr and getattr(t.value, "id", "") == "self"
                            for t in n.targets):
                    forward = self.method(self.classes[n.value.func.id], "forward")
                    return forward.args if forward is not None else None
        return None

    def method(self, cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
        return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)

    def dropped_argument(self, node: ast.Call) -> None:
        """One positional argument the callee has a default for dropped (those after it passed by name)."""
        params = self.callee(node)
        if params is None or params.vararg is not None or any(isinstance(a, ast.Starred) for a in node.args):
            return
        positional = [*params.posonlyargs, *params.args]
        if isinstance(self.parents.get(self.parents.get(params)), ast.ClassDef):
            positional = positional[1:]  # self
        first_default = len(positional) - len(params.defaults)
        named = {k.arg for k in node.keywords}
        for i in range(min(len(node.args), len(positional))):
            if i < first_default:
                continue
            later = positional[i + 1:len(node.args)]
            if any(p in params.posonlyargs or p.arg in named for p in later):
                continue
            new = copy.deepcopy(node)
            new.args = node.args[:i]
            new.keywords = [ast.keyword(p.arg, copy.deepcopy(a)) for p, a in zip(later, node.args[i + 1:])] \
                + copy.deepcopy(node.keywords)
            self.add("argument", node, new)

    def delete(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr):
            call = node.value
            if not isinstance(call, ast.Call):
                return  # a docstring, a bare name: nothing to delete
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) \
                    and getattr(func.value.func, "id", "") == "super":
                return  # super().__init__(): not a mistake, a crash
            self.add("delete", node, "pass")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if any(isinstance(n, ast.JoinedStr) for n in ast.walk(node)):
                return  # an error message being put together: its wording is not graded
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value is None:
                return
            names = [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
            other = [t for t in targets for n in ast.walk(t) if isinstance(n, (ast.Attribute, ast.Subscript))
                     and isinstance(n.ctx, ast.Store)]
            if not other:
                if not names or not any(self.read_after(node, n.id) for n in names):
                    return  # never read afterwards: deleting it changes nothing
                if not all(self.bound_before(node, n.id) for n in names):
                    return  # a first binding: deleting it is a NameError, not a mistake
            self.add("delete", node, "pass")

    def negate(self, test: ast.expr) -> None:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return  # `bool` drops the not
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return  # `cmp` negates it (`<` to `>=`)
        self.add("negate", test, ast.UnaryOp(ast.Not(), test))

    def call_more(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        # a mask inverted: masked_fill(m, v) -> masked_fill(~m, v); torch.where(m, a, b) -> torch.where(~m, a, b)
        if name in ("masked_fill", "masked_fill_", "masked_scatter", "masked_scatter_", "masked_select", "where") \
                and node.args and not isinstance(node.args[0], (ast.Compare, ast.Starred)) \
                and not (isinstance(node.args[0], ast.UnaryOp) and isinstance(node.args[0].op, ast.Invert)) \
                and (name != "where" or len(node.args) == 3):
            self.add("negate", node.args[0], ast.UnaryOp(ast.Invert(), node.args[0]))
        # two adjacent positional arguments swapped
        if name not in _NO_SWAP:
            plain = (ast.Name, ast.Subscript, ast.Attribute, ast.Call, ast.BinOp, ast.UnaryOp)
            for i in range(len(node.args) - 1):
                a, b = node.args[i], node.args[i + 1]
                if isinstance(a, plain) and isinstance(b, plain) and ast.dump(a) != ast.dump(b) \
                        and not _is_negative_constant(a) and not _is_negative_constant(b):
                    new = copy.deepcopy(node)
                    new.args[i], new.args[i + 1] = new.args[i + 1], new.args[i]
                    self.add("swap", node, new)
        # a loop bound off by one
        if isinstance(func, ast.Name) and name == "range" and not node.keywords and 1 <= len(node.args) <= 3 \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            args = node.args
            if len(args) == 1:
                if not isinstance(args[0], ast.Constant):
                    self.add("bounds", node, ast.Call(func, [_moved(args[0], -1)], []))
                self.add("bounds", node, ast.Call(func, [ast.Constant(1), args[0]], []))
            else:
                for i, by in ((0, 1), (1, -1)):
                    if not isinstance(args[i], ast.Constant) and not _is_negative_constant(args[i]):
                        new = copy.deepcopy(node)
                        new.args[i] = _moved(args[i], by)
                        self.add("bounds", node, new)
        # a keyword argument dropped (given as False or None, it is PyTorch's default: not made)
        for i, keyword in enumerate(node.keywords):
            if keyword.arg is None or keyword.arg in _KEYWORDS \
                    or isinstance(keyword.value, ast.Constant) and keyword.value.value in (False, None):
                continue
            new = copy.deepcopy(node)
            del new.keywords[i]
            self.add("keyword", node, new)
        # an out-of-place method made in place, on a variable
        if isinstance(func, ast.Attribute) and name in _HAS_INPLACE and isinstance(func.value, ast.Name) \
                and func.value.id not in ("torch", "F", "nn", "np", "math", "self", "ctx") \
                and not self.in_function_pass(node):
            new = copy.deepcopy(node)
            new.func.attr = name + "_"
            self.add("inplace", node, new)

    def slices(self, node: ast.Subscript) -> None:
        if self.in_raise(node):
            return
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for k, part in enumerate(parts):
            if not isinstance(part, ast.Slice):
                continue
            for field, by in (("lower", 1), ("upper", -1)):
                bound = getattr(part, field)
                if bound is None or isinstance(bound, ast.Constant) or _is_negative_constant(bound):
                    continue  # none, or a number (`const` moves those)
                new = copy.deepcopy(node)
                target = new.slice.elts[k] if isinstance(new.slice, ast.Tuple) else new.slice
                setattr(target, field, _moved(bound, by))
                self.add("bounds", node, new)

    def similar(self, node: ast.Name) -> None:
        """A variable read in place of another of the same stem (``h`` for ``h0``, ``x`` for ``x_``)."""
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.attr in _METADATA:
            return
        if isinstance(parent, ast.Call) and node in parent.args[:1] and isinstance(parent.func, (ast.Attribute, ast.Name)) \
                and (getattr(parent.func, "attr", None) or getattr(parent.func, "id", "")).endswith("_like"):
            return
        if self.in_raise(node):
            return
        stem = _stem(node.id)
        if not stem:
            return
        statement = self.statement_of(node)
        for other in self.bound(self.scope(node)):
            if other != node.id and _stem(other) == stem and self.bound_before(statement, other):
                self.add("swap", node, other)

    def returned_input(self, node: ast.Return) -> None:
        function = self.function_of(node)
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        a = function.args
        params = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.arg not in ("self", "cls", "ctx")]
        operands = _operands(node.value)
        for name in params:
            if name in operands:
                self.add("input", node.value, name)

    def call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name is None:
            return
        if (isinstance(func, ast.Attribute) and name in _DROP and not node.args and not node.keywords
                or isinstance(func, ast.Attribute) and name in _DROP_WITH_ARGUMENTS) \
                and not (name == "detach" and self.in_function_pass(node)):  # autograd is off there
            self.add("call", node, func.value)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and len(node.args) == 1 and not isinstance(node.args[0], ast.Starred) and not node.keywords:
            self.add("call", node, node.args[0])  # a layer (or transform) the forward pass forgets: self.act(h) -> h
        if isinstance(func, ast.Name) and name in self.siblings and node.args \
                and not isinstance(node.args[0], ast.Starred):
            self.add("call", node, node.args[0])  # another function of the exercise not called: shard(batch, ...) -> batch
        if name in _SWAP and not (_SWAP[name] in _UNFILLED and self.under_empty_test(node)):
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


#: Expressions that need no parentheses where another was (a receiver kept, an argument in its call's place).
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)


def _moved(bound: ast.expr, by: int) -> ast.expr:
    """``bound + 1`` or ``bound - 1`` (folded into a trailing constant: ``n - 1`` moved by one is ``n - 2``)."""
    if isinstance(bound, ast.BinOp) and isinstance(bound.op, (ast.Add, ast.Sub)) \
            and isinstance(bound.right, ast.Constant) and type(bound.right.value) is int:
        value = bound.right.value * (1 if isinstance(bound.op, ast.Add) else -1) + by
        if value == 0:
            return bound.left
        return ast.BinOp(bound.left, ast.Add() if value > 0 else ast.Sub(), ast.Constant(abs(value)))
    return ast.BinOp(bound, ast.Add() if by > 0 else ast.Sub(), ast.Constant(abs(by)))


def _operands(node: ast.expr) -> list[str]:
    """The names a computation works on: a method's receiver, a call's positional arguments, an operator's
    operands, through nested calls and operators (``corr2d(x, w) + b``: x, w, b; not keyword values)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.BinOp):
        return _operands(node.left) + _operands(node.right)
    if isinstance(node, ast.Call):
        found = _operands(node.func.value) if isinstance(node.func, ast.Attribute) else []
        return found + [n for a in node.args if isinstance(a, (ast.Name, ast.Call, ast.BinOp)) for n in _operands(a)]
    return []


#: Calls that give a Python number.
_NUMBER_CALLS = {"len", "int", "float", "abs", "round", "item", "numel", "dim", "max", "min", "sum", "index"}


def _number(node: ast.expr) -> bool:
    """Whether an expression evaluates to a Python number, as far as its text shows."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _number(node.operand)
    if isinstance(node, ast.BinOp):
        return _number(node.left) and _number(node.right)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in _NUMBER_CALLS and (name not in ("max", "min", "sum", "abs", "round")
                                          or all(_number(a) for a in node.args))
    return False


def _is_negative_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)


def _stem(name: str) -> str:
    """A name less its trailing digits and underscores: ``h0`` and ``h``, ``x_`` and ``x`` share one."""
    return name.rstrip("0123456789_")


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
    maker.functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    maker.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
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
