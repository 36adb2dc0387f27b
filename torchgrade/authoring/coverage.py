"""What no check exercises: per target, the reference's lines no check runs and the lines no mutant changes.

A survivor shows a mistake no check catches, but only where a mutant makes that mistake: a line that
no check runs (an attention mask applied only where a mask is given, a loop's second step) lets every
mistake on it through, and a line no mutation operator touches is never measured at all. While the
audit grades the reference, each request's sandbox worker traces the lines of the exercise's module it
runs (torchgrade/sandbox/linetrace.py); only their numbers come back, and this module decides what they
mean.

Counted are the statements of the target's mutated region (torchgrade.authoring.mutants.regions: between its
``# BEGIN SOLUTION`` / ``# END SOLUTION`` markers, or its body, and the private helpers it calls) that
run when the target is called: inside a function, not a ``def`` or ``class`` line (those run at
import), not a docstring, ``pass``, ``global`` or ``nonlocal``; comments and blank lines are no
statements. A statement spread over several lines counts once, at its first line; a compound one
(``if``, ``for``, ``with``, ``try``) by its header. A loop whose body no check runs twice in one call
(an RNN's carry tried only on one-step sequences) is listed too: a mistake in what one step hands the
next passes every check.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from torchgrade.authoring.mutants import Mutant, regions

_SKIPPED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass, ast.Global, ast.Nonlocal)


@dataclass(frozen=True)
class Statement:
    line: int  # its first line
    header: tuple[int, ...]  # the lines that are its own (a compound statement's header; a simple one's all)
    text: str  # its first line, stripped
    body: tuple[int, ...] = ()  # a loop's: its body's first statement's own lines


@dataclass
class Coverage:
    """One target's: the statements counted, those no check runs, those no mutant changes."""

    counted: int
    unrun: list[Statement] = field(default_factory=list)
    untouched: list[Statement] = field(default_factory=list)
    once: list[Statement] = field(default_factory=list)  # loops whose body no check runs twice in one call
    #: False where some checks run the target in other processes (the data-parallel ranks): unrun not known.
    measured: bool = True

    def as_dict(self) -> dict:
        return {"statements": self.counted, "measured": self.measured,
                "lines_no_check_runs": [{"line": s.line, "code": s.text} for s in self.unrun] if self.measured else None,
                "lines_no_mutant_changes": [{"line": s.line, "code": s.text} for s in self.untouched],
                "loops_no_check_runs_twice": [{"line": s.line, "code": s.text} for s in self.once] if self.measured else None}

    @classmethod
    def from_dict(cls, data: dict) -> Coverage:
        def rows(key: str) -> list[Statement]:
            return [Statement(int(r["line"]), (int(r["line"]),), str(r["code"])) for r in data.get(key) or ()]

        return cls(int(data.get("statements", 0)), rows("lines_no_check_runs"), rows("lines_no_mutant_changes"),
                   rows("loops_no_check_runs_twice"), bool(data.get("measured", True)))


def _docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def statements(path: Path, name: str) -> list[Statement]:
    """The statements of target `name`'s region that run when it is called, in line order."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    text = source.splitlines()
    region = regions(tree, text, name)[0]
    found: dict[int, Statement] = {}

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.stmt) and inside and child.lineno in region \
                    and not isinstance(child, _SKIPPED) and not _docstring(child):
                body = getattr(child, "body", None)
                end = body[0].lineno - 1 if isinstance(body, list) and body else child.end_lineno
                header = tuple(range(child.lineno, max(child.lineno, end) + 1))
                first = body[0] if isinstance(child, (ast.For, ast.AsyncFor, ast.While)) else None
                if first is not None:
                    inner = getattr(first, "body", None)
                    last = inner[0].lineno - 1 if isinstance(inner, list) and inner else first.end_lineno
                    loop = tuple(range(first.lineno, max(first.lineno, last) + 1))
                found.setdefault(child.lineno, Statement(child.lineno, header, text[child.lineno - 1].strip(),
                                                         loop if first is not None else ()))
            visit(child, inside)

    visit(tree, False)
    return [found[n] for n in sorted(found)]


def target_coverage(path: Path, name: str, ran: dict | None, mutants: Iterable[Mutant]) -> Coverage:
    """Target `name` of the reference at `path`: `ran`, what its checks ran in the sandbox (`load_ran`;
    None: coverage was not taken), `mutants`, every mutant made of it."""
    counted = statements(path, name)
    measured = ran is not None and not ran["elsewhere"]
    seen = set(ran["lines"]) if ran is not None else set()
    repeated = set(ran["repeated"]) if ran is not None else set()
    changed = {m.line for m in mutants}
    unrun = [s for s in counted if not seen.intersection(s.header)] if measured else []
    once = [s for s in counted if s.body and seen.intersection(s.body) and not repeated.intersection(s.body)]
    return Coverage(len(counted), unrun, [s for s in counted if not changed.intersection(s.header)],
                    once if measured else [], measured)


def save_ran(path: Path, ran: dict | None) -> None:
    """What a target's checks ran (torchgrade.engine.differential.covered's entry), for the audit's process (a
    pool's worker grades the reference)."""
    ran = ran or {"lines": (), "repeated": (), "elsewhere": False}
    path.write_text(json.dumps({"lines": sorted(ran["lines"]), "repeated": sorted(ran["repeated"]),
                                "elsewhere": bool(ran["elsewhere"])}))


def load_ran(path: Path) -> dict | None:
    """What `save_ran` wrote (None where nothing was: coverage not taken)."""
    try:
        data = json.loads(path.read_text())
        return {"lines": set(data["lines"]), "repeated": set(data["repeated"]), "elsewhere": bool(data["elsewhere"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def coverage_lines(coverage: Coverage | None) -> list[str]:
    """A target's coverage as terminal lines (`torchgrade audit`), indented under its figures."""
    if coverage is None:
        return []
    out = []
    if not coverage.measured:
        out.append("  lines no check runs: not measured (its checks run it in other processes, the data-parallel ranks)")
    elif coverage.unrun:
        out.append(f"  {len(coverage.unrun)} of {coverage.counted} line(s) no check runs (every mistake there survives):")
        out.extend(f"    line {s.line}: {s.text}" for s in coverage.unrun)
    if coverage.once:
        out.append(f"  {len(coverage.once)} loop(s) whose body no check runs twice in one call (a mistake in what "
                   f"one step hands the next passes):")
        out.extend(f"    line {s.line}: {s.text}" for s in coverage.once)
    if coverage.untouched:
        out.append(f"  {len(coverage.untouched)} of {coverage.counted} line(s) no mutant changes (the audit measures "
                   f"nothing there):")
        out.extend(f"    line {s.line}: {s.text}" for s in coverage.untouched)
    return out
