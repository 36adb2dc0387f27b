"""A submission's exercise files as the trusted process reads them: bounded in size, parsed once per content.

The static scan (torchgrade/sandbox/forbidden.py) and the check's call line (differential) parse the
student's file in the process that decides scores. A file is the student's to make: a 4 MB list
literal once cost that process 2.4 GB and four times the run's time, and its syntax tree stayed
cached for the whole run. So a file past `MAX_SOURCE_BYTES` is not read at all (the check fails, for
that student, with `too_large`'s message), and parsed trees are cached by the content's digest, a
few at a time (`PARSED_KEPT`), never by the text itself.
"""

from __future__ import annotations

import ast
import hashlib
from collections import OrderedDict
from pathlib import Path

#: An exercise file larger than this is refused by the trusted side (the bundled course's largest is 25 KB).
MAX_SOURCE_BYTES = 1 << 20
#: Parsed modules kept at once (one submission's modules; a batch grades one submission at a time).
PARSED_KEPT = 16

_parsed: OrderedDict[str, ast.Module | None] = OrderedDict()


class TooLarge(Exception):
    """An exercise file past MAX_SOURCE_BYTES; the message says which, how large, and what to do."""


def too_large(path: Path, size: int) -> str:
    return (f"{path.name} is {size / (1 << 20):.1f} MiB; an exercise file may be at most "
            f"{MAX_SOURCE_BYTES // (1 << 20)} MiB: keep data out of it (load it from a file instead)")


def read(path: Path) -> str:
    """The text of an exercise file (TooLarge past the limit, OSError if it cannot be read)."""
    with open(path, "rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise TooLarge(too_large(path, max(path.stat().st_size, len(data))))
    return data.decode("utf-8", errors="replace")


def digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def parse(source: str, key: str | None = None) -> ast.Module | None:
    """The syntax tree of `source` (None where Python cannot parse it), from a small cache by digest."""
    key = key or digest(source)
    if key in _parsed:
        _parsed.move_to_end(key)
        return _parsed[key]
    try:
        tree: ast.Module | None = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    _parsed[key] = tree
    while len(_parsed) > PARSED_KEPT:
        _parsed.popitem(last=False)
    return tree
