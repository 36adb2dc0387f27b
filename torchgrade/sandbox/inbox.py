"""The inbox: the one folder the trusted side shares with sandboxes, and how a submission is staged in it.

Each trusted process has one inbox (mode 0711: a sandbox user may pass through, never list it).
A sandbox gets a home in it holding a copy of the submission and the workers' working folders;
under bubblewrap the inbox is the only writable folder shared with the host, so only the
submission being graded is visible. The copy takes regular files only: a symlink in a submission
(to the reference, to /etc/shadow) is left behind, never followed by the trusted side.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

#: What a staged submission may hold; files beyond these limits are not copied.
MAX_STAGED_BYTES = 64 * 1024**2
MAX_STAGED_FILES = 2000
_SKIP_DIRS = {"__pycache__", ".git", "__MACOSX"}
#: How a staged file is opened (Windows has neither flag, and wants binary mode said).
_NO_FOLLOW_NO_WAIT = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)

_path: str | None = None
_owner = 0


PREFIX = "torchgrade-inbox-"
#: How long an inbox of a process that is gone stays, untouched, before another grader removes it.
STALE_SECONDS = 3600


def path() -> str:
    """This process's inbox, made on first use and removed when the process exits: at its exit (atexit), at a
    pool worker's (multiprocessing runs its finalizers, not atexit's), else by the next grader that finds
    the inbox of a process that is gone (`sweep`)."""
    global _path, _owner
    if _path is None or _owner != os.getpid() or not os.path.isdir(_path):
        sweep()
        _path, _owner = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"), os.getpid()
        os.chmod(_path, 0o711)
        atexit.register(_remove, _path, _owner)
        from multiprocessing import util

        util.Finalize(None, _remove, args=(_path, _owner), exitpriority=0)
    return _path


def sweep() -> None:
    """Remove the inboxes of this user's graders that are gone (killed: nothing of theirs ran at exit)."""
    import psutil

    folder = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            owner = entry.name[len(PREFIX):].split("-", 1)[0]
            if not entry.name.startswith(PREFIX) or not owner.isdigit() or psutil.pid_exists(int(owner)):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                # (an hour untouched: a grader in another PID namespace sharing this folder is not taken for gone)
                if entry.is_dir(follow_symlinks=False) and info.st_uid == getattr(os, "geteuid", lambda: info.st_uid)() \
                        and time.time() - info.st_mtime > STALE_SECONDS:
                    remove(Path(entry.path))


def _remove(folder: str, owner: int) -> None:
    if os.getpid() == owner and os.path.isdir(folder):  # not in a forked child that exits: the folder is its parent's
        remove(Path(folder))


def remove(folder: Path) -> None:
    """Delete a folder a sandbox wrote in, even where it took away its own permissions."""
    def allow_and_retry(function, path, _):
        # Only without root (with it, permissions never stop rmtree), and never through a symlink.
        for target in (os.path.dirname(path), path):
            if os.path.isdir(target) and not os.path.islink(target):
                with contextlib.suppress(OSError):
                    os.chmod(target, 0o700)
        with contextlib.suppress(OSError):
            function(path)

    root = hasattr(os, "geteuid") and os.geteuid() == 0
    shutil.rmtree(folder, ignore_errors=root, onerror=None if root else allow_and_retry)


def output_file(target: str | None) -> str:
    """The file in a worker's folder that takes what is printed while importing (None) or running `target`."""
    return "output.log" if target is None else f"{target}.output.log"


def new_home() -> Path:
    """A fresh folder in the inbox for one submission's sandbox."""
    home = Path(tempfile.mkdtemp(dir=path(), prefix="s"))
    os.chmod(home, 0o711)
    return home


def workdir(home: Path, name: str, user: tuple[int, int] | None) -> Path:
    """A private working folder for one worker, owned by the sandbox user where there is one."""
    folder = home / name
    folder.mkdir(mode=0o700)
    if user is not None:
        os.chown(folder, *user)
    return folder


def stage(source: Path, dest: Path) -> None:
    """Copy a submission's regular files (not symlinks, devices or caches) to `dest`, read-only for the sandbox."""
    copied = total = 0
    for root, dirs, names in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not os.path.islink(os.path.join(root, d)))
        into = dest / os.path.relpath(root, source)
        into.mkdir(parents=True, exist_ok=True)
        os.chmod(into, 0o755)
        for name in sorted(names):
            if name.endswith(".pyc") or copied >= MAX_STAGED_FILES:
                continue
            try:  # O_NOFOLLOW: a symlink fails here; O_NONBLOCK: a FIFO cannot stall the grader
                fd = os.open(os.path.join(root, name), os.O_RDONLY | _NO_FOLLOW_NO_WAIT)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or total + info.st_size > MAX_STAGED_BYTES:
                    continue
                data = f.read(info.st_size + 1)[:info.st_size]
            target = into / name
            target.write_bytes(data)
            os.chmod(target, 0o644)
            copied += 1
            total += len(data)
    dest.mkdir(parents=True, exist_ok=True)
    os.chmod(dest, 0o755)
