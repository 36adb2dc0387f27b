"""Which lines of one module a request ran: the audit's coverage of the reference, taken in the sandbox.

While `torchgrade audit` grades the reference, each request asks the worker to trace the lines of the
exercise's module (``sys.settrace``: Python 3.10 has no ``sys.monitoring``); only their numbers go back
to the trusted process, which decides what they mean (torchgrade/authoring/coverage.py). Code that runs in other
processes (the data-parallel probes' ranks) is not seen here: the request then says so, and its lines
are not counted as unrun.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

#: At most this many line numbers go back per request.
MAX_LINES = 100_000

#: Set while a request runs code in processes of its own (the ranks of the data-parallel probes).
elsewhere = False


def ran_elsewhere() -> None:
    """Say that the current request runs the target in other processes, whose lines are not traced here."""
    global elsewhere
    elsewhere = True


class LineTrace:
    """The lines of `filename` run inside the ``with`` block, in this thread and the threads it starts, and
    those run more than once in one call of their function (a loop's body that a check runs twice)."""

    def __init__(self, filename: str):
        self.filename = filename
        self.lines: set[int] = set()
        self.repeated: set[int] = set()

    def _call(self, frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != self.filename:
            return None  # no line events for any other file: torch's Python code costs one call each
        # the instructions this call reached a line at (a generator's resumption counts as a call of its own):
        # a line reached again at the same instruction runs again, where a statement over several lines
        # comes back to its first line at another instruction
        reached: set[int] = set()

        def line(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                if frame.f_lasti in reached:
                    self.repeated.add(frame.f_lineno)
                else:
                    reached.add(frame.f_lasti)
                    self.lines.add(frame.f_lineno)
            return line

        return line

    def __enter__(self) -> LineTrace:
        global elsewhere
        elsewhere = False
        self._previous = sys.gettrace()
        threading.settrace(self._call)
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(self._previous)
        threading.settrace(None)  # (threading has no gettrace before 3.12)

    def reply(self) -> dict:
        """What goes back with the request's reply: plain numbers, and whether code ran elsewhere."""
        return {"lines": sorted(self.lines)[:MAX_LINES], "lines_repeated": sorted(self.repeated)[:MAX_LINES],
                "lines_elsewhere": elsewhere}
