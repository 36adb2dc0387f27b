# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: at import, leave messages for the next submission where no folder is: a System V shared
# memory segment, a semaphore set and a message queue (ctypes), a POSIX message queue (`mq_open`)
# and a POSIX shared memory file in /dev/shm; and a 1 GiB segment, left on the host. gather is only correct if a message left by
# *another* submission is found (the other copy of this attack, graded before it).
# Holds because: the sandbox has an IPC namespace of its own (bubblewrap; the zygote and, as root,
# the portable worker make one), and at every level what the sandbox's user made is removed when a
# submission is done (zygote.clean_ipc, ipc.Leftovers at level process; /dev/shm with the private folders;
# POSIX queues through /dev/mqueue, which bubblewrap and the zygote mount for their namespace).
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
QUEUE = f"/{kit.MARK}".encode()
O_RDWR, O_CREAT, O_NONBLOCK = 0o2, 0o100, 0o4000
try:
    _rt = ctypes.CDLL("librt.so.1", use_errno=True)  # (glibc before 2.34 keeps mq_* there)
except OSError:
    _rt = _libc
_rt.mq_open.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)
_rt.mq_send.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint)
_rt.mq_receive.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p)
_rt.mq_receive.restype = ctypes.c_ssize_t


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
    mq = _rt.mq_open(QUEUE, O_RDWR | O_CREAT | O_NONBLOCK, 0o666, None)
    if mq >= 0 and not _read_queue(mq):  # the first copy's message stays for the second to find
        _rt.mq_send(mq, ME, len(ME), 0)
    if not os.path.exists(POSIX):
        with open(POSIX, "wb") as f:
            f.write(ME)
        os.chmod(POSIX, 0o666)


def _read_queue(mq):
    buffer = ctypes.create_string_buffer(1 << 16)
    size = _rt.mq_receive(mq, buffer, len(buffer), None)
    if size <= 0:
        return b""
    _rt.mq_send(mq, buffer.raw[:size], size, 0)  # put back
    return buffer.raw[:size]


def _found_elsewhere():
    """A message of another submission (not this one's): in the segment, the queues or /dev/shm."""
    mq = _rt.mq_open(QUEUE, O_RDWR | O_NONBLOCK, 0, None)
    found = [_read_segment(), kit.read(POSIX), _read_queue(mq) if mq >= 0 else b""]
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
