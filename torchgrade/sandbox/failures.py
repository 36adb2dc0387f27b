"""How a sandbox fails to answer, as the trusted side names it (host.py and the portable backend raise these)."""

from __future__ import annotations


class SandboxFailure(Exception):
    """The student's process did not answer: it timed out, died, or sent something that is not plain data."""

    #: True when the zygote died too: the worker may have been collateral damage, not the culprit.
    collateral = False


class Timeout(SandboxFailure):
    """No answer within the time limit."""


class Died(SandboxFailure):
    """The worker process ended while running a request."""


class BadReply(SandboxFailure):
    """The worker answered with something the trusted side refuses to decode."""


class ZygoteGone(SandboxFailure):
    """The zygote stopped answering (a request that met this is sent again, once, to a new one)."""

    collateral = True
