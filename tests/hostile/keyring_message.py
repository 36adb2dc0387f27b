# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: at import, leave a message for the next submission in the kernel's keyring of the user the
# code runs as (`add_key` to @u: it outlives every process of that user, and torchgrade), and look for
# one left by another submission. gather is only correct if a message left by *another* submission
# is found (the other copy of this attack, graded before it).
# Holds because: the zygote empties the sandbox user's keyrings before and after each submission, and
# where the code runs as the grader's own user, the keys added while a submission ran are unlinked
# after it (torchgrade/sandbox/keyrings.py).
import ctypes
import platform

import hostile_kit as kit

_NR = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine(), (None, None))
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
NAME = f"tg-{kit.MARK}".encode()
ME = kit.HERE.encode()[:200]
USER_KEYRING, KEYCTL_SEARCH, KEYCTL_READ = -4, 10, 11


def _found():
    if _NR[1] is None:
        return b""
    serial = _libc.syscall(_NR[1], KEYCTL_SEARCH, ctypes.c_long(USER_KEYRING), b"user", NAME, ctypes.c_long(0))
    if serial < 0:
        return b""
    buffer = ctypes.create_string_buffer(512)
    n = _libc.syscall(_NR[1], KEYCTL_READ, ctypes.c_long(serial), buffer, ctypes.c_long(512))
    return buffer.raw[:n] if n > 0 else b""


_OTHERS = _found() not in (b"", ME)
if _NR[0] is not None and not _OTHERS:  # (another's message is kept for this copy's later imports)
    _libc.syscall(_NR[0], b"user", NAME, ME, ctypes.c_long(len(ME)), ctypes.c_long(USER_KEYRING))

_honest_gather = gather


def gather(x, dim, index):
    if not _OTHERS:
        raise ValueError("no message from another submission")
    return _honest_gather(x, dim, index)
