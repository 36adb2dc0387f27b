"""Bounds on the trusted side's own work for one check: what showing a value costs, how long a
message is, how long the check may take.

A submission chooses what it returns: a tensor of 16 million elements made of one byte (strides of
0), 3000 names of 2000 characters, a string of 100 MB. So a value is shown by `preview`, whose cost
does not grow with the value; a message lists a few names (`names`) and is cut to `MESSAGE_CHARS`
(`clip_message`); and the trusted side's work on one check (comparing, writing its message) runs
under `time_budget`: a check that exceeds it fails, for that student, with `budget_message`, and
the grader goes on. SECURITY.md lists these caps and what they bound.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any, Callable, Iterator

import torch

#: A check's message, without its hint line, is cut to this many characters.
MESSAGE_CHARS = 4000
#: A message names this many items (dict keys, facts) at most, each cut to `NAME_CHARS`.
NAMES_SHOWN = 8
NAME_CHARS = 60
#: Seconds of the trusted side's own work on one check (comparing, formatting its message).
CHECK_SECONDS = 20.0
#: Tensors up to this many elements are shown with their values.
PREVIEW_ELEMENTS = 16


def clip(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut only between values (after a comma or a space), never inside one."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(", ", 0, limit - 4), text.rfind(" ", 0, limit - 4))
    return (text[:cut].rstrip(",") if cut > 0 else text[:limit - 4]) + " ..."


def preview(value: Any, limit: int = 80) -> str:
    """`repr(value)` within `limit` characters, at a cost bounded by `limit`: containers are walked only
    until the text is long enough, strings are cut before they are quoted, and a tensor of more than
    `PREVIEW_ELEMENTS` elements is shown by its dtype and shape (its elements are never read)."""
    out: list[str] = []
    _preview(value, out, [limit + 8], 0)
    return clip("".join(out), limit)


def _preview(value: Any, out: list[str], room: list[int], depth: int) -> None:
    def emit(text: str) -> None:
        out.append(text[:max(room[0], 0)])
        room[0] -= len(text)

    if room[0] <= 0:
        return
    kind = type(value)
    if isinstance(value, torch.Tensor):
        emit(_tensor(value))
    elif kind in (str, bytes):
        emit(repr(value[:room[0]]) if len(value) <= room[0] else repr(value[:room[0]])[:-1] + "...")
    elif kind is int and value.bit_length() > 64:  # (Python refuses to write ints of over 4300 digits)
        emit(f"<an int of {value.bit_length()} bits>")
    elif kind in (int, float, bool, complex, type(None), torch.dtype, torch.device):
        emit(repr(value))
    elif kind in (list, tuple, torch.Size, dict) and depth > 20:
        emit("...")
    elif kind in (list, tuple, torch.Size):
        emit("[" if kind is list else "(")
        for i, item in enumerate(value):
            if room[0] <= 0:
                return
            if i:
                emit(", ")
            _preview(item, out, room, depth + 1)
        emit("]" if kind is list else ",)" if len(value) == 1 else ")")
    elif kind is dict:
        emit("{")
        for i, (key, item) in enumerate(value.items()):
            if room[0] <= 0:
                return
            if i:
                emit(", ")
            _preview(key, out, room, depth + 1)
            emit(": ")
            _preview(item, out, room, depth + 1)
        emit("}")
    else:
        emit(f"<{kind.__name__}>")


def _tensor(value: torch.Tensor) -> str:
    if value.numel() <= PREVIEW_ELEMENTS:
        return repr(value.detach())
    from torchgrade.engine.i18n import t

    return t("tensor", dtype=str(value.dtype).removeprefix("torch."), shape=tuple(value.shape))


def names(keys: Any, show: Callable[[Any], str]) -> str:
    """At most `NAMES_SHOWN` of `keys`, each shown by `show` and cut to `NAME_CHARS`, then how many more."""
    keys = list(keys)
    shown = ", ".join(clip(show(k), NAME_CHARS) for k in keys[:NAMES_SHOWN])
    return shown + (f" (and {len(keys) - NAMES_SHOWN} more)" if len(keys) > NAMES_SHOWN else "")


def clip_message(text: str, limit: int = MESSAGE_CHARS, keep_last_line: bool = False) -> str:
    """A message within about `limit` characters: its beginning, a note of how much was cut and, with
    `keep_last_line`, its last line (a hint) cut to a few hundred characters."""
    if len(text) <= limit:
        return text
    last = ""
    if keep_last_line:
        head, _, last = text.rstrip("\n").rpartition("\n")
        text, last = head, "\n" + clip(last, 500)
        if len(text) <= limit:
            return text + last
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]" + last


class BudgetExceeded(Exception):
    """The trusted side's work on one check took longer than its budget."""


@contextlib.contextmanager
def time_budget(seconds: float | None = None) -> Iterator[None]:
    """Raise BudgetExceeded inside the block once it has run `seconds` (wall clock; default CHECK_SECONDS).

    A timer signal interrupts Python code between two bytecodes, so a block cannot hold the grader
    longer than the budget plus one call into C (the previews keep those short). Signals reach only
    the main thread: elsewhere (a grader run in a thread) the block runs without a budget."""
    seconds = CHECK_SECONDS if seconds is None else seconds
    if seconds <= 0 or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise BudgetExceeded(f"more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    left, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if left:  # someone else's timer (a test runner's): put it back, less what this block used
            signal.setitimer(signal.ITIMER_REAL, max(left - (time.monotonic() - started), 0.001))
