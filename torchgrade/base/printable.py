"""Names from students' files made fit to print: any bytes, any length, no control characters.

A file name is whatever bytes the file system holds. Python hands the ones that are not UTF-8 on as
lone surrogates (``surrogateescape``), which no UTF-8 writer accepts: one such name in a note or a
message stopped every writer of the class (results.json, report.html, the ledger). ``shown`` is how
a name appears in a note; ``utf8`` is the last guard of every writer, for text that still holds one.
"""

from __future__ import annotations

import re

#: The longest name shown whole; a longer one keeps its start and its end.
MAX_NAME = 160
_SURROGATE = re.compile("[\ud800-\udfff]")
#: C0 and C1 controls, DEL, and the bidirectional overrides (a name must not reorder the text around it).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(name: object) -> str:
    """A file or folder name as a note shows it: bytes that are not UTF-8 as \\xNN, control characters
    as \\xNN (\\n, \\t as such), and at most MAX_NAME characters (the middle cut)."""
    text = str(name)
    if _SURROGATE.search(text):
        raw = text.encode("utf-8", "surrogateescape") if not _lone_high(text) else b""
        text = raw.decode("utf-8", "backslashreplace") if raw else _SURROGATE.sub("\ufffd", text)
    text = _CONTROL.sub(_escape, text)
    if len(text) > MAX_NAME:
        half = MAX_NAME // 2 - 2
        text = f"{text[:half]}[...]{text[-half:]}"
    return text


def _escape(match: re.Match) -> str:
    c = match.group()
    if c in "\n\t\r":
        return repr(c)[1:-1]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def _lone_high(text: str) -> bool:
    """Whether it holds a surrogate that surrogateescape did not make (only \\udc80-\\udcff are bytes)."""
    return any(not "\udc80" <= c <= "\udcff" for c in _SURROGATE.findall(text))


def valid(text: str) -> str:
    """Text that UTF-8 can hold: each lone surrogate (a byte of a name that is not UTF-8) as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def utf8(text: str) -> bytes:
    """Text as UTF-8, a lone surrogate (a name of other bytes that reached it) as U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return valid(text).encode("utf-8")
