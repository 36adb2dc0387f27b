"""Authoring: student stubs generated from the reference solutions' solution markers."""

from __future__ import annotations

import re
from pathlib import Path

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
BEGIN_REMOVE, END_REMOVE = "# BEGIN REMOVE", "# END REMOVE"
_DEFINITION = re.compile(r"^(\s*)(?:async\s+)?(?:def|class)\s+(\w+)")


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
        if stripped in (END, END_REMOVE):
            raise MarkerError(f"{filename} line {i + 1}: '{stripped}' without a matching begin marker")
        out.append(lines[i])
        i += 1
    return "".join(out)


def generate_stubs(reference_dir: Path, stubs_dir: Path, write: bool = True) -> list[Path]:
    """Regenerate every stub; return the stub files whose content changed (or would change)."""
    changed = []
    for ref in sorted(reference_dir.glob("*.py")):
        if ref.name.startswith("_"):
            continue
        stub = make_stub(ref.read_text(encoding="utf-8"), str(ref))
        path = stubs_dir / ref.name
        if not path.exists() or path.read_text(encoding="utf-8") != stub:
            changed.append(path)
            if write:
                stubs_dir.mkdir(parents=True, exist_ok=True)
                path.write_text(stub, encoding="utf-8")
    return changed
