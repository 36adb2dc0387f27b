"""POSIX message queues by name (ctypes), for tests: a host may have no /dev/mqueue that lists them,
and torchgrade itself only lists and unlinks what /dev/mqueue shows (torchgrade.sandbox.ipc)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os


def _rt() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("librt.so.1", use_errno=True)  # glibc before 2.34 keeps mq_* there
    except OSError:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def make_queue(name: str) -> bool:
    """`mq_open(name, O_CREAT)`; whether this system has POSIX message queues and made it."""
    rt = _rt()
    if not hasattr(rt, "mq_open"):
        return False
    rt.mq_open.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)
    fd = rt.mq_open(name.encode(), os.O_RDWR | os.O_CREAT, 0o600, None)
    if fd < 0:
        return False
    rt.mq_close(fd)
    return True


def queue_exists(name: str) -> bool:
    """Whether the POSIX message queue `name` ("/name") exists in this IPC namespace. False where there are
    no POSIX queues (macOS)."""
    rt = _rt()
    if not hasattr(rt, "mq_open"):
        return False
    rt.mq_open.argtypes = (ctypes.c_char_p, ctypes.c_int)
    fd = rt.mq_open(name.encode(), os.O_RDONLY)
    if fd < 0:
        return False
    rt.mq_close(fd)
    return True


def unlink_queue(name: str) -> bool:
    """`mq_unlink(name)`; whether it went."""
    rt = _rt()
    return hasattr(rt, "mq_unlink") and rt.mq_unlink(name.encode()) == 0
