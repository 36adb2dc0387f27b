"""Shared memory, semaphores and message queues a submission leaves behind: kept from the next one, removed.

System V IPC objects (``shmget``, ``semget``, ``msgget``, reachable with ctypes) outlive the process
that made them: a submission could leave a segment for the next submission to read, or gigabytes of
it on the host. POSIX shared memory and semaphores are files in /dev/shm, emptied with the private
temporary folders (zygote.clean) or, at level process, by ``Leftovers``.

- ``own_namespace``: an IPC namespace of its own (Linux, with CAP_SYS_ADMIN: the zygote without
  bubblewrap and the portable worker when the grader is root; bubblewrap makes one with
  --unshare-ipc). What its processes make is invisible outside it and goes with its last process.
  ``private_posix_shm``: likewise a /dev/shm of its own for the zygote without bubblewrap (bubblewrap
  mounts a private one), emptied whole between submissions.
- ``remove_owned``: at the zygote's reset, every object the sandbox user made (all of them in its
  namespace): nothing one submission made is there for the next.
- ``Leftovers``: at level process (no user, maybe no namespace of its own), what appeared while a
  submission was graded, made by the grader's user and not by the grader itself, is removed after it.

POSIX message queues (``mq_open``) live in the IPC namespace too; they are listed, and removed, where an
mqueue file system is mounted on /dev/mqueue for it (bubblewrap's ``--mqueue``, ``mount_queues``).

Linux lists System V objects in /proc/sysvipc, macOS and the BSDs with ``ipcs``. Where POSIX shared memory
and semaphores are not files (macOS: ``shm_open`` names are listed nowhere) they cannot be found, so they
are not removed; nothing fails either.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import stat
import sys
from dataclasses import dataclass

from torchgrade.sandbox import keyrings

KINDS = ("shm", "sem", "msg")
#: Where Linux lists the System V objects of the reader's IPC namespace.
SYSVIPC = "/proc/sysvipc"
IPC_RMID = 0
CLONE_NEWIPC = 0x08000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
#: Where POSIX shared memory and named semaphores live (Linux).
POSIX_SHM = "/dev/shm"
#: Where POSIX message queues are listed (Linux): an mqueue file system shows the queues of the IPC namespace
#: of the process that mounted it. Bubblewrap mounts one for the sandbox's (--mqueue), the zygote without
#: it one for its own; a host may have none (then a queue can be opened by name, not listed).
MQUEUE = "/dev/mqueue"


@dataclass(frozen=True)
class Object:
    """One System V IPC object: its kind, id, key, owner and creator (uids), and creating process (shm only)."""

    kind: str
    id: int
    key: int
    uid: int
    cuid: int
    cpid: int = 0


def objects() -> list[Object]:
    """The System V IPC objects of this process's IPC namespace: Linux lists them in /proc/sysvipc, the BSDs
    and macOS by ``ipcs`` (``_ipcs``); [] where neither can."""
    if not os.path.isdir(SYSVIPC):
        return _ipcs()
    found = []
    for kind in KINDS:
        try:
            with open(f"{SYSVIPC}/{kind}") as f:
                header, *rows = f.read().splitlines()
        except (OSError, ValueError):
            continue
        names = header.split()
        for row in rows:
            fields = dict(zip(names, row.split()))
            with contextlib.suppress(KeyError, ValueError):
                found.append(Object(kind, int(fields["shmid" if kind == "shm" else "semid" if kind == "sem"
                                                       else "msqid"]), int(fields["key"]), int(fields["uid"]),
                                    int(fields["cuid"]), int(fields.get("cpid", 0))))
    return found


#: The columns ``ipcs -c -p`` prints on macOS and the BSDs, by kind letter: T ID KEY MODE OWNER GROUP
#: CREATOR CGROUP, then its process ids (CPID for shared memory).
_IPCS_KINDS = {"m": "shm", "s": "sem", "q": "msg"}


def _ipcs() -> list[Object]:
    """The System V objects ``ipcs`` lists (macOS, the BSDs), owners by name or number."""
    import pwd
    import subprocess

    command = shutil.which("ipcs")
    if command is None:
        return []
    try:
        listing = subprocess.run([command, "-m", "-s", "-q", "-c", "-p"], capture_output=True, text=True,
                                 timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []

    def uid(name: str) -> int:
        return int(name) if name.isdigit() else pwd.getpwnam(name).pw_uid

    found, names = [], []
    for line in listing.splitlines():
        fields = line.split()
        if fields[:2] == ["T", "ID"]:
            names = fields
        elif fields and fields[0] in _IPCS_KINDS and len(fields) == len(names):
            row = dict(zip(names, fields))
            with contextlib.suppress(KeyError, ValueError):
                found.append(Object(_IPCS_KINDS[fields[0]], int(row["ID"]), int(row["KEY"], 0), uid(row["OWNER"]),
                                    uid(row["CREATOR"]), int(row.get("CPID", 0))))
    return found


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def remove(obj: Object) -> bool:
    """Remove one object (IPC_RMID: a segment still attached goes when its last process detaches)."""
    libc = _libc()
    if obj.kind == "shm":
        done = libc.shmctl(obj.id, IPC_RMID, None)
    elif obj.kind == "sem":
        done = libc.semctl(obj.id, 0, IPC_RMID)
    else:
        done = libc.msgctl(obj.id, IPC_RMID, None)
    return done == 0


def remove_owned(uid: int) -> int:
    """Remove every object that `uid` owns or made, System V and POSIX message queues (the caller runs as
    `uid`, or may remove any); how many."""
    return sum(remove(o) for o in objects() if uid in (o.uid, o.cuid)) + sum(
        _unlink(os.path.join(MQUEUE, name), uid) for name in queues())


def queues() -> list[str]:
    """The POSIX message queues listed in /dev/mqueue ([] where nothing is mounted there)."""
    try:
        return os.listdir(MQUEUE)
    except OSError:
        return []


def _unlink(path: str, uid: int) -> bool:
    """Remove a file of `uid`'s (unlinking a file of the mqueue file system is `mq_unlink`)."""
    try:
        if os.lstat(path).st_uid != uid:
            return False
        os.unlink(path)
        return True
    except OSError:
        return False


def mount_queues() -> bool:
    """Mount an mqueue file system on /dev/mqueue for this process's IPC namespace, in its mount namespace
    (Linux, with CAP_SYS_ADMIN, after `private_posix_shm`); whether it could."""
    if not sys.platform.startswith("linux"):
        return False
    libc = _libc()
    try:
        os.makedirs(MQUEUE, exist_ok=True)
        return libc.mount(b"mqueue", MQUEUE.encode(), b"mqueue", ctypes.c_ulong(MS_NOSUID | MS_NODEV), None) == 0
    except (OSError, AttributeError):
        return False


def own_namespace() -> bool:
    """Move this process (and all it starts from now on) into a new IPC namespace; whether it could."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return _libc().unshare(CLONE_NEWIPC) == 0
    except (OSError, AttributeError):
        return False


def private_posix_shm(size_bytes: int) -> bool:
    """Give this process (and all it starts) a /dev/shm of its own, an empty tmpfs of `size_bytes`, in a
    mount namespace of its own (Linux, with CAP_SYS_ADMIN); whether it could."""
    if not sys.platform.startswith("linux") or not os.path.isdir(POSIX_SHM):
        return False
    libc = _libc()
    try:
        if libc.unshare(CLONE_NEWNS) != 0:
            return False
        # (private first: the tmpfs must not appear in the host's mounts through shared propagation)
        if libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
            return False
        options = f"size={size_bytes},mode=1777".encode()
        return libc.mount(b"tmpfs", POSIX_SHM.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), options) == 0
    except (OSError, AttributeError):
        return False


class Leftovers:
    """What a submission graded at level process leaves in the host's IPC: taken note of before it runs,
    and what is new after it, of the grader's user and not made by the grader, removed.

    Another program of the same user that makes an object while a submission is graded could lose it
    (a file in /dev/shm that a live process still maps is kept: by then the submission's are dead):
    this is the level that offers no user of the sandbox's own (SECURITY.md)."""

    def __init__(self) -> None:
        self.uid = os.geteuid() if hasattr(os, "geteuid") else -1
        self.before = {(o.kind, o.id, o.key) for o in objects()}
        self.files = set(_posix_shm())
        self.queues = set(queues())
        self.keys = keyrings.Keys()

    def remove(self) -> int:
        """Remove what appeared since; how many objects, files and keys."""
        removed = self.keys.remove()
        for o in objects():
            if (o.kind, o.id, o.key) not in self.before and self.uid in (o.uid, o.cuid) and o.cpid != os.getpid():
                removed += remove(o)
        new = set(_posix_shm()) - self.files
        mapped = _mapped_files() if new else set()
        for name in new:
            path = os.path.join(POSIX_SHM, name)
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                # (the submission's processes are dead by now: one a live process maps is another program's,
                # such as the semaphores of the grader's own pool of processes)
                if info.st_uid == self.uid and (info.st_dev, info.st_ino) not in mapped:
                    if stat.S_ISDIR(info.st_mode):
                        shutil.rmtree(path)
                    else:
                        os.unlink(path)
                    removed += 1
        for name in set(queues()) - self.queues:
            removed += _unlink(os.path.join(MQUEUE, name), self.uid)
        return removed


def _mapped_files() -> set[tuple[int, int]]:
    """The files live processes map, as (device, inode) from /proc/PID/maps; nothing where there is no
    such file. Not by path: glibc's sem_open maps a temporary name, then links the semaphore's own name
    to it and unlinks the first, so maps shows "/dev/shm/sem.XXXXXX (deleted)" for a live semaphore."""
    found = set()
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if pid.isdigit():
            with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/maps", encoding="utf-8",
                                                                errors="replace") as f:
                for line in f:  # address, permissions, offset, device (major:minor, hex), inode, path
                    fields = line.split(None, 5)
                    if len(fields) >= 5 and fields[4] != "0":
                        major, minor = fields[3].split(":")
                        found.add((os.makedev(int(major, 16), int(minor, 16)), int(fields[4])))
    return found


def _posix_shm() -> list[str]:
    try:
        return os.listdir(POSIX_SHM)
    except OSError:
        return []
