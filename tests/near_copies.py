"""Disguised copies of code, as students who copy make them, one kind of disguise each (DISGUISES):

- `near_copy`: every local name renamed, each function on its own (a method's names unlike its class's
  other methods'), reformatted (ast.unparse's layout: other line breaks, parentheses and quotes), comments
  and blank lines added;
- `reorder`: neighbouring independent assignments swapped;
- `loops`: `for i in range(...)` written as a `while`, a list comprehension as a `for` that appends;
- `commute`: the operands of `*` swapped, comparisons mirrored (`a < b` as `b > a`, `a == b` as `b == a`);
- `extract`: the second half of each target's longest function moved into a module-level helper;
- `inline`: a private module-level helper (`_name`) the target calls with `x = helper(...)` or `return helper(...)` written
  into the target.

Each keeps the code's behaviour (the definitions keep their names: the grader imports them). Used by
tests/test_similarity.py and benchmarks/similarity_benchmark.py.
"""

from __future__ import annotations

import ast
import builtins
import copy
import random

_KEEP = set(dir(builtins)) | {"torch", "nn", "F", "math", "np", "self", "cls", "ctx"}


def _tree(text: str) -> tuple[ast.Module, set[str], set[str]]:
    tree = ast.parse(text)
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    top |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    imported = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    return tree, top, imported


class _Rename(ast.NodeTransformer):
    """Each function's own names renamed on their own (nested functions see their parent's renames)."""

    def __init__(self, rng: random.Random, keep: set[str]):
        self.rng, self.keep, self.scopes = rng, keep, [{}]

    def _new(self, name: str) -> str:
        if name in self.keep or name.startswith("__"):
            return name
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        word = self.rng.choice(["tmp", "val", "my", "res", "q", "z"])
        return self.scopes[-1].setdefault(name, f"{word}_{sum(map(len, self.scopes))}{self.rng.randrange(10)}")

    def visit_FunctionDef(self, node):
        self.scopes.append({})
        self.generic_visit(node)
        self.scopes.pop()
        return node

    def visit_Name(self, node):
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._new(node.arg)
        return node


def _layout(tree: ast.Module, rng: random.Random) -> str:
    lines = []
    for line in ast.unparse(tree).splitlines():
        lines.append(line)
        if line.strip() and rng.random() < 0.15:
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(f"{indent}# {rng.choice(['step', 'careful here', 'done', 'see notes'])}")
        if rng.random() < 0.1:
            lines.append("")
    return "\n".join(lines) + "\n"


def near_copy(text: str, seed: int, keep_names: set[str] = frozenset()) -> str:
    """`text` (a module) with the local names inside each top-level definition renamed, function by function,
    reformatted, with comments; the definitions keep their own names."""
    rng = random.Random(seed)
    tree, top, imported = _tree(text)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            _Rename(rng, _KEEP | top | imported | set(keep_names)).visit(node)
    return _layout(tree, rng)


def _stored(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bodies(tree: ast.AST):
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def reorder(text: str, seed: int = 0) -> str:
    """Neighbouring assignments that do not touch each other's names swapped."""
    tree = ast.parse(text)
    for body in _bodies(tree):
        i = 0
        while i + 1 < len(body):
            a, b = body[i], body[i + 1]
            if isinstance(a, ast.Assign) and isinstance(b, ast.Assign) \
                    and not (_stored(a) & (_loaded(b) | _stored(b))) and not (_stored(b) & _loaded(a)):
                body[i], body[i + 1] = b, a
                i += 2
            else:
                i += 1
    return ast.unparse(tree) + "\n"


class _Loops(ast.NodeTransformer):
    def __init__(self):
        self.count = 0

    def visit_For(self, node):
        self.generic_visit(node)
        call = node.iter
        if not (isinstance(node.target, ast.Name) and isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "range" and 1 <= len(call.args) <= 2 and not call.keywords and not node.orelse
                and not any(isinstance(n, (ast.Continue, ast.Break)) for s in node.body for n in ast.walk(s))):
            return node
        start, stop = (ast.Constant(0), call.args[0]) if len(call.args) == 1 else call.args
        self.count += 1
        i, end = node.target.id, f"_end{self.count}"
        setup = ast.parse(f"{i} = 0\n{end} = 0").body
        setup[0].value, setup[1].value = start, stop
        loop = ast.parse(f"while {i} < {end}:\n    pass").body[0]
        loop.body = [*node.body, ast.parse(f"{i} += 1").body[0]]
        return [*setup, loop]

    def visit_Assign(self, node):
        self.generic_visit(node)
        comp = node.value
        if not (isinstance(comp, ast.ListComp) and len(comp.generators) == 1 and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and not comp.generators[0].is_async):
            return node
        g, out = comp.generators[0], node.targets[0].id
        append = ast.parse(f"{out}.append(0)").body[0]
        append.value.args = [comp.elt]
        body: list[ast.stmt] = [append]
        for test in reversed(g.ifs):
            branch = ast.parse("if 0:\n    pass").body[0]
            branch.test, branch.body = test, body
            body = [branch]
        loop = ast.For(target=g.target, iter=g.iter, body=body, orelse=[], lineno=0)
        return [ast.parse(f"{out} = []").body[0], loop]


def loops(text: str, seed: int = 0) -> str:
    """`for i in range(...)` (no break or continue) as a `while`; `x = [e for v in it if c]` as a `for` that appends."""
    return ast.unparse(ast.fix_missing_locations(_Loops().visit(ast.parse(text)))) + "\n"


class _Commute(ast.NodeTransformer):
    _MIRROR = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult):
            node.left, node.right = node.right, node.left
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and type(node.ops[0]) in self._MIRROR:
            node.left, node.comparators = node.comparators[0], [node.left]
            node.ops = [self._MIRROR[type(node.ops[0])]()]
        return node


def commute(text: str, seed: int = 0) -> str:
    """The operands of every `*` swapped; every single comparison mirrored."""
    return ast.unparse(_Commute().visit(ast.parse(text))) + "\n"


def _functions(node: ast.AST) -> list[ast.FunctionDef]:
    return [node] if isinstance(node, ast.FunctionDef) else \
        [n for n in node.body if isinstance(n, ast.FunctionDef)] if isinstance(node, ast.ClassDef) else []


def extract(text: str, targets: set[str], seed: int = 0) -> str:
    """The second half of each target's longest function (a tail that returns) moved into a helper."""
    tree, top, imported = _tree(text)
    helpers = []
    for node in tree.body:
        if getattr(node, "name", None) not in targets:
            continue
        functions = sorted(_functions(node), key=lambda f: -len(f.body))
        if not functions or len(functions[0].body) < 2:
            continue
        f = functions[0]
        if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Nonlocal, ast.Global)) for n in ast.walk(f)):
            continue
        cut = len(f.body) // 2
        tail = f.body[cut:]
        params = [a.arg for a in [*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs,
                                  *filter(None, [f.args.vararg, f.args.kwarg])]]
        bound = set(params) | {n for s in f.body[:cut] for n in _stored(s)}
        free = sorted(n for s in tail for n in _loaded(s) if n in bound and n not in _KEEP - {"self", "cls", "ctx"})
        free = sorted(set(free))
        name = f"_{node.name.lower()}_rest"
        helper = ast.parse(f"def {name}({', '.join(free)}):\n    pass").body[0]
        helper.body = tail
        f.body = [*f.body[:cut], ast.parse(f"return {name}({', '.join(free)})").body[0]]
        helpers.append(helper)
    tree.body = [*tree.body, *helpers]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


class _Inline(ast.NodeTransformer):
    def __init__(self, helpers: dict[str, ast.FunctionDef]):
        self.helpers, self.count = helpers, 0

    def _expand(self, call: ast.AST):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in self.helpers
                and not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)):
            return None
        helper = self.helpers[call.func.id]
        params = [a.arg for a in helper.args.args]
        if len(call.args) > len(params) or helper.args.vararg or helper.args.kwarg or helper.args.kwonlyargs:
            return None
        body = [s for s in helper.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        returns = [n for s in body for n in ast.walk(s) if isinstance(n, ast.Return)]
        if not body or returns != ([body[-1]] if isinstance(body[-1], ast.Return) else []):
            return None  # only a helper that returns once, at its end
        self.count += 1
        rename = {p: f"{p}_{self.count}" for p in (params + sorted({n for s in body for n in _stored(s)}))}
        body = [copy.deepcopy(s) for s in body]
        for s in body:
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and n.id in rename:
                    n.id = rename[n.id]
        defaults = helper.args.defaults
        values = [*call.args, *defaults[len(defaults) - (len(params) - len(call.args)):]] if len(call.args) < len(params) \
            else list(call.args)
        setup = []
        for p, value in zip(params, values):
            assign = ast.parse(f"{rename[p]} = 0").body[0]
            assign.value = copy.deepcopy(value)
            setup.append(assign)
        result = body.pop().value if body and isinstance(body[-1], ast.Return) else ast.Constant(None)
        return setup + body, result

    def visit_Return(self, node):
        expanded = self._expand(node.value) if node.value is not None else None
        if expanded is None:
            return node
        statements, result = expanded
        return [*statements, ast.Return(result)]

    def visit_Assign(self, node):
        expanded = self._expand(node.value)
        if expanded is None:
            return node
        statements, result = expanded
        node.value = result
        return [*statements, node]


def inline(text: str, targets: set[str], seed: int = 0) -> str:
    """Each call of a module-level helper that returns once, at its end, in `x = helper(...)` or
    `return helper(...)` inside a target, written out in the target (the helper stays for other callers)."""
    tree, _, _ = _tree(text)
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")}
    for node in tree.body:
        if getattr(node, "name", None) in targets:
            for f in _functions(node):
                _Inline(helpers).visit(f)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


#: Each kind of disguise: a function of (module text, the module's targets) giving the disguised text.
DISGUISES = {
    "renamed and reformatted": lambda text, targets: near_copy(text, seed=len(text)),
    "reordered": lambda text, targets: reorder(text),
    "loops rewritten": lambda text, targets: loops(text),
    "operands swapped": lambda text, targets: commute(text),
    "moved into a helper": lambda text, targets: extract(text, targets),
    "helpers inlined": lambda text, targets: inline(text, targets),
}


def definitions(modules: dict[str, str], qualname: str) -> str | None:
    """The syntax tree of a target's definition in `modules` (the last one, as Python keeps it), without its layout."""
    module, name = qualname.split(".", 1)
    found = [n for n in ast.parse(modules[module]).body if getattr(n, "name", None) == name]
    return ast.dump(found[-1]) if found else None


def _written(text: str, targets: set[str]) -> set[str]:
    """The targets a fairness file defines (it is appended to a module: its definitions replace the stub's)."""
    return {n.name for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in targets}


def disguised_class(root, assignment, independent: int = 19):
    """A class of `independent` students, each the stubs with one or two of the fairness corpus's own
    solutions (tests/fairness/<module>/*.py) written in, no file given to two students; six more, each a
    copy of another of them with one kind of disguise (DISGUISES, in order) applied to what it wrote, the
    first student whose code that disguise changes (for "helpers inlined", a student who moved the tail of
    each function into a helper, `extract`: no solution of the corpus has one); and two who both copied the
    reference (renamed and reformatted; operands swapped).

    Returns (students {name: {module: text}}, {copying pair (a frozenset): the targets copied (exercise.target)},
    the independent students' names)."""
    from pathlib import Path

    names = tuple(e.name for e in assignment.exercises)
    targets = {m: {t.name for t in assignment.targets if t.exercise == m} for m in names}
    stubs = {m: (Path(assignment.stubs_dir) / f"{m}.py").read_text() for m in names}
    reference = {m: (Path(assignment.reference_dir) / f"{m}.py").read_text() for m in names}
    files = sorted(Path(root).glob("*/*.py"), key=lambda p: (-len(p.read_text()), p.name))  # the longest first
    students: dict[str, dict[str, str]] = {}
    wrote: dict[str, dict[str, set[str]]] = {}
    for i, path in enumerate(files):
        who = f"student{i % independent:02d}"
        code, mine = students.setdefault(who, dict(stubs)), wrote.setdefault(who, {})
        module = path.parent.name
        code[module] = code[module] + "\n\n" + path.read_text()
        mine.setdefault(module, set()).update(_written(path.read_text(), targets[module]))
    copies = {}
    for kind, disguise in DISGUISES.items():
        # the first student whose own code this disguise changes (not every solution has a range loop to rewrite)
        for original in sorted(set(students) - {who for pair in copies for who in pair}):
            code = students[original]
            if kind == "helpers inlined":  # no fairness solution has a helper: this student writes some
                code = {m: extract(text, wrote[original][m]) if wrote[original].get(m) else text for m, text in code.items()}
            copied = {f"{m}.{t}" for m, ts in wrote[original].items() for t in ts}
            disguised = {m: disguise(text, wrote[original].get(m, set())) if wrote[original].get(m) else stubs[m]
                         for m, text in code.items()}
            if any(definitions(code, t) != definitions(disguised, t) for t in copied):
                break
        else:
            raise ValueError(f"no solution in {root} that '{kind}' changes")
        students[original], students[f"copy-of-{original}"] = code, disguised
        copies[frozenset((original, f"copy-of-{original}"))] = copied
    students["ref-copy-1"] = {m: near_copy(text, seed=1) for m, text in reference.items()}
    students["ref-copy-2"] = {m: commute(text) for m, text in reference.items()}
    copies[frozenset(("ref-copy-1", "ref-copy-2"))] = {t.qualname for t in assignment.targets}
    return students, copies, sorted(f"student{i:02d}" for i in range(independent))
