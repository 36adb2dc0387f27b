"""How a sandbox process ended, in words a student can act on (both sides: the host says it of a
worker, the data-parallel probe of a rank)."""

from __future__ import annotations

import signal

_HINTS = {"SIGSEGV": " (a segmentation fault)", "SIGABRT": " (aborted)",
          "SIGKILL": " (killed, often for using too much memory)", "SIGXCPU": " (it used up its CPU-time limit)"}


def describe_exit(code: int | None, running: str = "") -> str:
    """`code` as subprocess and multiprocessing give it (negative: killed by that signal; None: no
    status); `running`: the target a rank was running (a rank's own sys.exit() is caught as an
    exception, so only os._exit() is suggested there)."""
    doing = f" while running {running}" if running else ""
    if code is None:
        return f"stopped answering{doing}" if running else "ended"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:  # Windows knows no SIGKILL: the portable backend reports its kills as -9
            name = "SIGKILL" if code == -9 else f"signal {-code}"
        return f"was killed by {name}{_HINTS.get(name, '')}{doing}"
    calls = "os._exit()" if running else "sys.exit(), os._exit()"
    return f"exited with status {code}{doing} (did the code call {calls} or kill its process?)"
