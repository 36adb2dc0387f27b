"""Near-copies of code, as students who copy make them: every local name renamed, the code reformatted
(ast.unparse's layout: other line breaks, parentheses and quotes), comments and blank lines added.

Used by tests/test_similarity.py and benchmarks/similarity_benchmark.py (a class of 300).
"""

from __future__ import annotations

import ast
import builtins
import random

_KEEP = set(dir(builtins)) | {"torch", "nn", "F", "math", "np", "self", "cls", "ctx"}


class _Rename(ast.NodeTransformer):
    def __init__(self, rng: random.Random, keep: set[str]):
        self.rng, self.keep, self.names = rng, keep, {}

    def _new(self, name: str) -> str:
        if name in self.keep or name.startswith("__"):
            return name
        return self.names.setdefault(name, f"{self.rng.choice(['tmp', 'val', 'my', 'res', 'q', 'z'])}_{len(self.names)}")

    def visit_Name(self, node):
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._new(node.arg)
        return node


def near_copy(text: str, seed: int, keep_names: set[str] = frozenset()) -> str:
    """`text` (a module) with the local names inside each top-level definition renamed, reformatted, with
    comments; the definitions keep their own names (the grader imports them by name)."""
    rng = random.Random(seed)
    tree = ast.parse(text)
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    imported = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            _Rename(rng, _KEEP | top | imported | set(keep_names)).visit(node)
    lines = []
    for line in ast.unparse(tree).splitlines():
        lines.append(line)
        if line.strip() and rng.random() < 0.15:
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(f"{indent}# {rng.choice(['step', 'careful here', 'done', 'see notes'])}")
        if rng.random() < 0.1:
            lines.append("")
    return "\n".join(lines) + "\n"
