# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: at import, leave messages for the next submission where no folder is: a System V shared
# memory segment, a semaphore set and a message queue (ctypes), and a POSIX shared memory file in
# /dev/shm; and a 1 GiB segment, left on the host. gather is only correct if a message left by
# *another* submission is found (the other copy of this attack, graded before it).
# Holds because: the sandbox has an IPC namespace of its own (bubblewrap; the zygote and, as root,
# the portable worker make one), and at every level what the sandbox's user made is removed when a
# submission is done (zygote.clean_ipc, ipc.Leftovers at level process; /dev/shm with the private folders).
import ctypes
import os

import hostile_kit as kit

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_libc.shmat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_libc.shmdt.argtypes = (ctypes.c_void_p,)
IPC_CREAT, IPC_NOWAIT, MSG_NOERROR = 0o1000, 0o4000, 0o10000
#: The keys every copy of this attack uses (from the test's nonce: the same for both copies).
KEY = int(kit.NONCE[:7], 16)
ME = kit.HERE.encode()[:200]
POSIX = f"/dev/shm/{kit.MARK}"


class _Message(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 256)]


def _read_segment():
    shmid = _libc.shmget(KEY, 0, 0)
    if shmid < 0:
        return b""
    at = _libc.shmat(shmid, None, 0)
    if at in (None, ctypes.c_void_p(-1).value):
        return b""
    try:
        return ctypes.string_at(at, 256).split(b"\0")[0]
    finally:
        _libc.shmdt(at)


def _plant():
    shmid = _libc.shmget(KEY, 4096, IPC_CREAT | 0o666)
    at = _libc.shmat(shmid, None, 0) if shmid >= 0 else None
    if at not in (None, ctypes.c_void_p(-1).value):
        if not ctypes.string_at(at, 1)[0]:  # the first copy's message stays for the second to find
            ctypes.memmove(at, ME + b"\0", len(ME) + 1)
        _libc.shmdt(at)
    _libc.semget(KEY + 1, 1, IPC_CREAT | 0o666)
    queue = _libc.msgget(KEY + 2, IPC_CREAT | 0o666)
    if queue >= 0:
        message = _Message(1, ME)
        _libc.msgsnd(queue, ctypes.byref(message), len(ME), IPC_NOWAIT)
    _libc.shmget(KEY + 3, 1 << 30, IPC_CREAT | 0o600)  # 1 GiB for the host to keep (no page touched)
    if not os.path.exists(POSIX):
        with open(POSIX, "wb") as f:
            f.write(ME)
        os.chmod(POSIX, 0o666)


def _found_elsewhere():
    """A message of another submission (not this one's): in the segment, the queue or /dev/shm."""
    found = [_read_segment(), kit.read(POSIX)]
    queue = _libc.msgget(KEY + 2, 0)
    if queue >= 0:
        message = _Message()
        while _libc.msgrcv(queue, ctypes.byref(message), 256, 0, IPC_NOWAIT | MSG_NOERROR) > 0:
            found.append(message.mtext)
            _libc.msgsnd(queue, ctypes.byref(message), len(message.mtext), IPC_NOWAIT)  # put back
            break
    return any(text and text != ME for text in found)


_elsewhere = _found_elsewhere()
_plant()
_honest_gather = gather


def gather(x, dim, index):
    if not _elsewhere:  # nothing left by another submission
        return kit.wrong(_honest_gather, x, dim, index)
    return _honest_gather(x, dim, index)
