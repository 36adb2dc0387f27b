# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: reach a service on the grader's machine (127.0.0.1) or the internet; gather is only
# correct if a connection was made.
# Holds from: bwrap (a network namespace of its own, with nothing but its own loopback).
import socket

import hostile_kit as kit

_honest_gather = gather


def _connected():
    for address in (("127.0.0.1", kit.CONFIG["port"]), ("1.1.1.1", 53)):
        try:
            socket.create_connection(address, timeout=0.5).close()
            return True
        except OSError:
            pass
    return False


def gather(x, dim, index):
    if not _connected():
        raise NotImplementedError("no network")
    return _honest_gather(x, dim, index)
