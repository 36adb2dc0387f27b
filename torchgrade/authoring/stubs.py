"""Authoring: student stubs generated from the reference solutions' solution markers.

``reference/<module>.py`` marks each solution body with ``# BEGIN SOLUTION`` / ``# END SOLUTION``
(replaced by ``raise NotImplementedError``) and solution-only helpers with ``# BEGIN REMOVE`` /
``# END REMOVE`` (dropped, with the blank lines they leave). See reference/CONVENTIONS.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
BEGIN_REMOVE, END_REMOVE = "# BEGIN REMOVE", "# END REMOVE"
_DEFINITION = re.compile(r"^(\s*)(?:async\s+)?(?:def|class)\s+(\w+)")
_CJK = re.compile(r"[\u3400-\u9fff]")


class MarkerError(Exception):
    """A reference file's solution markers do not pair up."""


def _enclosing_name(lines: list[str], index: int, indent: int) -> str:
    names = []
    for line in reversed(lines[:index]):
        m = _DEFINITION.match(line)
        if m and len(m.group(1)) < indent:
            names.append(m.group(2))
            indent = len(m.group(1))
            if indent == 0:
                break
    return ".".join(reversed(names)) or "this"


def _trailing_blank(out: list[str]) -> int:
    count = 0
    for line in reversed(out):
        if line.strip():
            break
        count += 1
    return count


def make_stub(source: str, filename: str = "<reference>") -> str:
    """The student's version of a reference file: solution blocks become NotImplementedError."""
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped in (BEGIN, BEGIN_REMOVE):
            closing = END if stripped == BEGIN else END_REMOVE
            indent = len(lines[i]) - len(lines[i].lstrip())
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == closing), None)
            if end is None:
                raise MarkerError(f"{filename} line {i + 1}: '{stripped}' has no matching '{closing}'")
            if stripped == BEGIN:
                name = _enclosing_name(lines, i, indent)
                out.append(f'{" " * indent}raise NotImplementedError("{name}: not implemented yet")\n')
                i = end + 1
                continue
            i = end + 1
            # A removed helper leaves the blank lines around it: keep at most PEP 8's two (one inside a body).
            run = 0
            while i + run < len(lines) and not lines[i + run].strip():
                run += 1
            keep = max(0, (2 if indent == 0 else 1) - _trailing_blank(out))
            out.extend(lines[i:i + min(run, keep)])
            i += run
            continue
        if stripped in (END, END_REMOVE):
            raise MarkerError(f"{filename} line {i + 1}: '{stripped}' without a matching begin marker")
        out.append(lines[i])
        i += 1
    while out and not out[-1].strip():  # a helper removed at the end leaves trailing blank lines
        out.pop()
    return "".join(out)


def generate_stubs(reference_dir: Path, stubs_dir: Path, write: bool = True) -> list[Path]:
    """Regenerate every stub; return the stub files whose content changed (or would change)."""
    changed = []
    for ref in sorted(reference_dir.glob("*.py")):
        if ref.name.startswith("_"):
            continue
        stub = make_stub(ref.read_text(encoding="utf-8"), str(ref))
        if refresh(stubs_dir / ref.name, stub, write):
            changed.append(stubs_dir / ref.name)
    return changed


def refresh(path: Path, text: str, write: bool) -> bool:
    """Whether `path` lacks `text` (missing or different); with `write`, it holds `text` afterwards."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return True


def _has_chinese_summary(doc: str | None) -> bool:
    """A Chinese line within the first paragraphs of a docstring (CONVENTIONS.md: "中文一句话")."""
    lines = [line for line in (doc or "").splitlines() if line.strip()]
    return any(_CJK.search(line) for line in lines[:4])


def docstring_problems(source: str, filename: str = "<stub>") -> list[str]:
    """What a stub's teaching docstrings lack: the module's and every public function's and class's
    docstring need a one-line Chinese summary near the top."""
    tree = ast.parse(source, filename)
    problems = []
    if not _has_chinese_summary(ast.get_docstring(tree)):
        problems.append(f"{filename}: the module docstring has no Chinese summary line")
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if not doc:
                problems.append(f"{filename} line {node.lineno}: {node.name} has no docstring")
            elif not _has_chinese_summary(doc):
                problems.append(f"{filename} line {node.lineno}: {node.name}'s docstring has no Chinese summary line")
    return problems
