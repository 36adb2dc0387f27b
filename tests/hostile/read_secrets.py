# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: look for the grader's secrets (a CI token in its environment) in os.environ and in
# /proc/*/environ of every visible process; gather is only correct if one was found.
# Holds from: unprivileged-user (the sandbox's environment is scrubbed; other users' /proc/*/environ
# cannot be read; under bubblewrap other processes are not visible).
import os

import hostile_kit as kit

_honest_gather = gather


def _secret_found():
    name = kit.CONFIG["secret_name"].encode()
    if kit.CONFIG["secret_name"] in os.environ:
        return True
    return any(name + b"=" in kit.read(f"/proc/{pid}/environ") for pid in kit.pids())


def gather(x, dim, index):
    if not _secret_found():
        raise NotImplementedError("no secret in sight")
    return _honest_gather(x, dim, index)
