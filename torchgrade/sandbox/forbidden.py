"""Forbidden calls: names seen while the student's code ran, and a static scan of its source.

Patterns come from the assignment file (``forbidden:`` per exercise or target) and use shell-style
wildcards. A bare pattern (``view``, ``*pool*``) matches a torch function or Tensor method by name,
at run time and in the source; a dotted pattern (``torch.optim.*``) matches a resolved dotted name
in the source only, where imports and aliases (``import torch.nn.functional as F``) are followed.
"""

from __future__ import annotations

import ast
import fnmatch
from dataclasses import dataclass
from pathlib import Path

from torchgrade.sandbox import sources


@dataclass(frozen=True)
class ForbiddenCall:
    """One use of a forbidden name: what was used, the rule it breaks, and where."""

    name: str
    pattern: str
    where: str

    def message(self, target: str) -> str:
        if self.pattern == "*":  # the recorder itself was switched off
            return f"forbidden: {target} may not switch off the grader's call recorder; at {self.where}"
        if self.pattern == PRIVATE:
            return (f"forbidden call: {target} may not use torch's private entry points, where calls are forbidden "
                    f"(here `{self.name}`: what it computes cannot be told from its name), found at {self.where}")
        if self.pattern == BRIDGE:
            return (f"forbidden call: {target} may not hand its tensors to numpy or another array library, nor take "
                    f"arrays from one, where calls are forbidden (here `{self.name}`: what they compute cannot be "
                    f"watched), found at {self.where}")
        if self.pattern == CHANGED:
            return (f"forbidden call: {target} may not change the code or state of torch or another installed library, "
                    f"where calls are forbidden (here `{self.name}`: torch's own code reads it where its work is not "
                    f"watched), found at {self.where}")
        if self.pattern == ARRAYS:
            return (f"forbidden call: {target} may not use numpy or another array library, where calls are forbidden "
                    f"(here `{self.name}`: what it computes cannot be watched), found at {self.where}")
        rule = f"`{self.pattern}`" if self.pattern == self.name else f"`{self.pattern}` (here `{self.name}`)"
        return f"forbidden call: {target} may not use {rule}, found at {self.where}"


def forbidden_message(calls: list[ForbiddenCall], target: str) -> str:
    """One message naming the first forbidden use and listing the others."""
    text = calls[0].message(target)
    others = [f"`{c.name}` ({c.where})" for c in calls[1:6]]
    if others:
        text += "\nalso: " + ", ".join(others)
    return text


def _match(name: str, patterns: tuple[str, ...]) -> str | None:
    bare = name.split(".")[-1]
    for pattern in patterns:
        if "." in pattern:
            if fnmatch.fnmatchcase(name, pattern):
                return pattern
        elif fnmatch.fnmatchcase(bare, pattern):
            return pattern
    return None


#: Names the sandbox's recorder uses (torchgrade.sandbox.recorder; kept here, which imports no torch).
DISPATCHER = "dispatcher"
#: The `where` of a call made inside a window with no frame of the submission's files on the stack: the target
#: is torch's own function, or code compiled under another file's name. It is the target's all the same.
UNLINED = "<no line>"
TAMPERED = "<recorder switched off>"
#: Prefixes of recorded names: a private entry point of torch (refused where calls are forbidden: its name
#: does not say what it computes), and a bridge to another array library (refused: what numpy computes is
#: not watched). See torchgrade.sandbox.entries.
PRIVATE = "<private> "
BRIDGE = "<bridge> "
#: ... and numpy or another array library used by the student's code (torchgrade.sandbox.arrays).
ARRAYS = "<array library> "
#: ... and a change to installed code's state (a global of torch's, an attribute of one of its classes) that torch's
#: own code reads while it runs for a call the recorder saw (torchgrade.sandbox.installed_state).
CHANGED = "<changed> "


def _operation(name: str) -> tuple[str, str]:
    """(the operation, the dotted name) of a recorded name: an overload (`gather.out`, `torch.ops.aten.gather.out`)
    is its operator; a dotted name (`torch.nn.functional.pad`) is its last part."""
    if name.startswith("torch.ops."):
        parts = name.split(".")
        return (parts[3] if len(parts) > 3 else parts[-1]), name
    if name.startswith("torch."):
        return name.rsplit(".", 1)[-1], name
    return name.split(".", 1)[0], name


def _tokens_match(name: str, pattern: str) -> bool:
    """Whether a run of `name`'s words (split at "_") matches `pattern`: torch names the private and
    backend variants of an operator after it (`thnn_conv2d`, `_slow_conv2d_forward`, `_pad_enum`)."""
    words = [w for w in name.split("_") if w]
    return any(fnmatch.fnmatchcase("_".join(words[i:j]), pattern)
               for i in range(len(words)) for j in range(i + 1, len(words) + 1))


def _match_runtime(name: str, where: str, patterns: tuple[str, ...]) -> str | None:
    operation, dotted = _operation(name)
    for pattern in patterns:
        if "." in pattern:
            if fnmatch.fnmatchcase(dotted, pattern) or fnmatch.fnmatchcase(dotted, pattern + ".*"):
                return pattern
        elif fnmatch.fnmatchcase(operation, pattern):
            return pattern
        elif where == DISPATCHER and _tokens_match(operation, pattern):  # an operator the mode did not see
            return pattern
    return None


def runtime_violations(calls: dict[str, str], patterns: tuple[str, ...]) -> list[ForbiddenCall]:
    """Forbidden names among the calls the sandbox recorded (only calls made from the student's files).

    A call seen only at torch's dispatcher (the student's code switched the recorder's mode off or went
    around it) counts like one seen with its line; a recorder switched off while a target with
    forbidden calls ran is a forbidden call in itself.
    """
    found = []
    if patterns and isinstance(calls.get(TAMPERED), str):
        found.append(ForbiddenCall("the call recorder", "*", f"run time: the code {calls[TAMPERED]}"))
    for name, where in calls.items():
        if not where or not isinstance(where, str) or name == TAMPERED:
            continue  # not a call's record
        if patterns and name.startswith((PRIVATE, BRIDGE, ARRAYS, CHANGED)):
            kind = next(k for k in (PRIVATE, BRIDGE, ARRAYS, CHANGED) if name.startswith(k))
            file, _, line = where.rpartition(":")
            shown = f"{file} line {line} (seen while it ran)" if file else "run time, while it ran" if where == UNLINED \
                else where  # (a thread: no line of the student's)
            found.append(ForbiddenCall(name[len(kind):], kind, shown))
            continue
        pattern = _match_runtime(name, where, patterns)
        if pattern and where == UNLINED:
            found.append(ForbiddenCall(name, pattern, "run time, in code with no line of your files (a torch function "
                                                      "used as the target, or code compiled under another file's name)"))
        elif pattern and where == DISPATCHER:
            found.append(ForbiddenCall(name, pattern, "run time, at torch's dispatcher (hidden from the call recorder)"))
        elif pattern:
            file, _, line = where.rpartition(":")
            found.append(ForbiddenCall(name, pattern, f"{file} line {line} (seen while it ran)"))
    return found


class _Aliases(ast.NodeVisitor):
    """Maps local names to the dotted names they were imported as."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.names[alias.asname] = alias.name
            else:
                self.names[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}" if node.module else alias.name


def _dotted(node: ast.AST, aliases: dict[str, str]) -> tuple[str, bool] | None:
    """The dotted name of an expression like ``F.conv2d`` or ``x.view``; and whether its root is an import."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        if node.id in aliases:
            return ".".join([aliases[node.id], *reversed(parts)]), True
        return ".".join([node.id, *reversed(parts)]), False
    if parts:  # e.g. (x + 1).view(...): the root is an expression
        return ".".join(["<expr>", *reversed(parts)]), False
    return None


def static_violations(path: Path, target: str, patterns: tuple[str, ...]) -> list[ForbiddenCall]:
    """Forbidden names used in the source of `target` and of the module-level helpers it reaches
    (sources.TooLarge for a file past the trusted side's limit)."""
    if not patterns:
        return []
    try:
        source = sources.read(path)
    except OSError:
        return []
    key = sources.digest(source)
    scan = (key, path.name, target, patterns)
    if scan not in _scans:
        _scans[scan] = _scan(source, key, path.name, target, patterns)
        while len(_scans) > 4096:  # (small values, keyed by digest: bounded, never by the text)
            _scans.pop(next(iter(_scans)))
    return list(_scans[scan])


_scans: dict[tuple, tuple[ForbiddenCall, ...]] = {}
_indexes: dict[str, tuple[dict[str, str], dict[str, ast.AST]] | None] = {}


def _index(source: str, key: str) -> tuple[dict[str, str], dict[str, ast.AST]] | None:
    """A module's import aliases and its top-level definitions by name (once per source, for all targets)."""
    if key in _indexes:
        return _indexes[key]
    tree = sources.parse(source, key)
    if tree is None:
        return None
    collector = _Aliases()
    collector.visit(tree)
    definitions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for node in tree.body:  # `helper = other_function` at module level
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    definitions.setdefault(t.id, node)
    _indexes[key] = (collector.names, definitions)
    while len(_indexes) > sources.PARSED_KEPT:
        _indexes.pop(next(iter(_indexes)))
    return _indexes[key]


def _scan(source: str, key: str, filename: str, target: str, patterns: tuple[str, ...]) -> tuple[ForbiddenCall, ...]:
    index = _index(source, key)
    if index is None:
        return ()
    aliases, definitions = index
    if target not in definitions:
        return ()
    found: dict[tuple[str, int], ForbiddenCall] = {}
    seen, todo = set(), [target]
    while todo:
        name = todo.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        for node in ast.walk(definitions[name]):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in definitions:
                    todo.append(node.id)
                    continue
                if node.id in aliases and node.id not in definitions:
                    dotted = aliases[node.id]
                    if dotted.startswith("torch") and (pattern := _match(dotted, patterns)):
                        found[(dotted, node.lineno)] = ForbiddenCall(dotted, pattern, f"{filename} line {node.lineno}")
            elif isinstance(node, ast.Attribute):
                resolved = _dotted(node, aliases)
                if resolved and (pattern := _match(resolved[0], patterns)):
                    shown = resolved[0].replace("<expr>.", "")
                    found[(shown, node.lineno)] = ForbiddenCall(shown, pattern, f"{filename} line {node.lineno}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                  and isinstance(node.args[1].value, str) and (pattern := _match(node.args[1].value, patterns))):
                found[(node.args[1].value, node.lineno)] = ForbiddenCall(
                    f"getattr(..., {node.args[1].value!r})", pattern, f"{filename} line {node.lineno}")
    return tuple(sorted(found.values(), key=lambda c: int(c.where.rsplit(" ", 1)[-1])))
