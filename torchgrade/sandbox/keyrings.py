"""Kernel keyrings: what a submission leaves in its user's keyrings, kept from the next one, removed.

Linux keeps keys (``add_key``, ``keyctl``: reachable with ctypes) in keyrings the kernel holds per
user: the user keyring (``@u``) and the user-session keyring (``@us``) live as long as the uid has
any process or key, and the persistent keyring (``KEYCTL_GET_PERSISTENT``) for days after its last
process, so a key that one submission's code adds there is readable by the next submission's, and
outlives torchgrade. Session, process and thread keyrings go with their processes.

- ``clear``: empty both keyrings of the calling process's uid. The zygote calls it, as the sandbox
  user, in the child that removes that user's IPC objects (zygote.clean_ipc), before and after each
  submission: that user is the sandbox's alone.
- ``Keys``: where the code runs as the grader's own user (bubblewrap without root, level process), the
  keyrings are also that user's other programs': the keys present before a submission are noted, and
  what is new after it is unlinked from them.

Elsewhere (macOS, Windows, a kernel without keys, an architecture whose system call numbers are not
known here) there are no kernel keyrings to carry anything, or none this reaches: nothing is done.
"""

from __future__ import annotations

import contextlib
import ctypes
import platform
import sys

#: (add_key, keyctl) system call numbers per architecture.
_SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219), "arm64": (217, 219)}
KEY_SPEC_PROCESS_KEYRING = -2
KEY_SPEC_USER_KEYRING = -4
KEY_SPEC_USER_SESSION_KEYRING = -5
KEYCTL_CLEAR, KEYCTL_UNLINK, KEYCTL_READ, KEYCTL_GET_PERSISTENT = 7, 9, 11, 22


def _keyctl(*args: int | ctypes.Array) -> int:
    """keyctl(2); -1 where the system has none."""
    if not sys.platform.startswith("linux") or platform.machine() not in _SYSCALLS:
        return -1
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        return int(libc.syscall(_SYSCALLS[platform.machine()][1], *[a if isinstance(a, ctypes.Array)
                                                                    else ctypes.c_long(a) for a in args]))
    return -1


def keys(ring: int) -> set[int]:
    """The serial numbers of the keys linked in `ring` (empty when it cannot be read)."""
    size = 4096
    while True:
        buffer = ctypes.create_string_buffer(size)
        n = _keyctl(KEYCTL_READ, ring, buffer, size)
        if n < 0:
            return set()
        if n <= size:
            return {int.from_bytes(buffer.raw[i:i + 4], sys.byteorder, signed=True) for i in range(0, n - n % 4, 4)}
        size = n


def rings() -> tuple[int, ...]:
    """This uid's keyrings that outlive its processes: the user, user-session and persistent ones (the last,
    where the kernel has it, lives on for days with no process of the uid at all)."""
    persistent = _keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_PROCESS_KEYRING)
    return (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING) + ((persistent,) if persistent > 0 else ())


def clear() -> None:
    """Empty this uid's lasting keyrings."""
    for ring in rings():
        _keyctl(KEYCTL_CLEAR, ring)


class Keys:
    """The keys of this uid's user keyrings now; `remove` unlinks those added since."""

    def __init__(self) -> None:
        self.before = {ring: keys(ring) for ring in rings()}

    def remove(self) -> int:
        """Unlink what was added since; how many keys."""
        removed = 0
        for ring in rings():
            for serial in keys(ring) - self.before.get(ring, set()):
                removed += _keyctl(KEYCTL_UNLINK, serial, ring) == 0
        return removed
