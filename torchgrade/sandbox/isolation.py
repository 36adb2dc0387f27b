"""How strongly the sandbox is isolated: bubblewrap, an unprivileged user, or resource limits only.

Found once per trusted process, strongest first (``LEVELS``):

- ``bwrap``: the zygote runs under bubblewrap in a root built from read-only binds of the system,
  the Python installation, the ``torchgrade`` engine and the course's probes folder (nothing
  else of the course: not its reference, not its checks), with private
  ``/tmp`` and ``/dev/shm``, no network, and its own pid, ipc and uts namespaces. The only
  writable place it shares with the trusted side is the *inbox*, where the host stages the current
  submission and the workers keep their working folders. Run as root, workers also switch to the
  unprivileged user of their own (``sandbox_user``): they cannot signal the zygote, and the process
  cap means something.
- ``unprivileged-user``: root without a usable bubblewrap. Workers switch to that user; the file
  system is protected only by its permissions.
- ``process``: neither. Workers have every limit the OS offers, a private working folder and a
  scrubbed environment, but run as the grader's own user. This level is the portable backend
  (``portable.py``: a fresh process per worker, no zygote), the only one where the Linux mechanisms
  are missing (``can_fork_workers``: macOS, Windows).

``TORCHGRADE_ISOLATION`` (one of ``LEVELS``) demands a level; unset, the best that works is used.
A level that fails to start falls back to the next one and says why on stderr; a demanded level
that fails is an error. See SECURITY.md for what each level guarantees.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from torchgrade.sandbox import inbox

LEVELS = ("bwrap", "unprivileged-user", "process")
ENV_VAR = "TORCHGRADE_ISOLATION"
#: Workers of a grader running as root become uid (and gid) SANDBOX_UID_BASE + the grader's pid.
SANDBOX_UID_BASE = 0x70000000
#: Where the inbox appears inside bubblewrap.
INSIDE = "/sandbox"
#: Size of the private /tmp and /dev/shm under bubblewrap (they live in memory).
TMPFS_BYTES = 256 * 1024**2

_ENGINE_DIR = Path(__file__).resolve().parents[1]
#: A course's probes folder, as the sandbox sees it (bound read-only; nothing else of the course is).
COURSE_PROBES = "/course/probes"
#: Files from /etc that the dynamic linker, Python and torch read; nothing else of /etc is visible.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group",
              "/etc/nsswitch.conf", "/etc/localtime", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf",
              "/etc/alternatives")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class IsolationError(Exception):
    """The isolation level asked for (TORCHGRADE_ISOLATION) is unknown or cannot be had here."""


@dataclass(frozen=True)
class Plan:
    """How to start one zygote at one isolation level."""

    level: str
    #: The command that wraps the zygote (bwrap and its options), or nothing.
    prefix: tuple[str, ...]
    #: The (uid, gid) a worker switches to after the fork, or None to keep the grader's own.
    user: tuple[int, int] | None
    #: The inbox as the host sees it, and as the sandbox does.
    inbox: str
    inside: str
    #: Folders the zygote empties between submissions (all of it, or only what `user` owns).
    clean: tuple[str, ...] = ()
    clean_all: bool = False

    def path(self, host_path: str | Path) -> str:
        """A path under the inbox, as the sandbox sees it."""
        relative = os.path.relpath(host_path, self.inbox)
        if relative.startswith(".."):
            raise ValueError(f"{host_path} is not in the inbox {self.inbox}")
        return self.inside if relative == "." else os.path.join(self.inside, relative)


def gpu_device_nodes() -> list[str]:
    """This machine's GPUs as their drivers show them, without starting CUDA: NVIDIA's numbered device
    nodes (a card each) and AMD's /dev/kfd."""
    return sorted(glob.glob("/dev/nvidia[0-9]*")) + (["/dev/kfd"] if os.path.exists("/dev/kfd") else [])


def requested_level() -> str | None:
    """The level TORCHGRADE_ISOLATION demands, or None for the best available."""
    value = os.environ.get(ENV_VAR, "").strip()
    if value in ("", "auto"):
        return None
    if value not in LEVELS:
        raise IsolationError(f"{ENV_VAR}={value!r}: expected one of {', '.join(LEVELS)} (or auto)")
    return value


def sandbox_user() -> tuple[int, int] | None:
    """(uid, gid) workers switch to when the grader runs as root: a user of this grader's own.

    ``SANDBOX_UID_BASE`` plus the grader's pid: no login uses it, and two graders running at once
    (``-j``) get different ones, so their sandboxes can neither signal nor read each other.
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    uid = SANDBOX_UID_BASE + os.getpid()
    return uid, uid


def plans(requested: str | None) -> list[Plan]:
    """The ways to start a zygote at the requested level (or at any level), strongest first."""
    box = inbox.path()
    user = sandbox_user()
    found: list[Plan] = []
    if not can_fork_workers():  # macOS, Windows: only the portable backend (see portable.py)
        return [Plan("process", (), None, box, box)] if requested in (None, "process") else []
    bwrap = shutil.which("bwrap")
    if requested in (None, "bwrap") and bwrap:
        if user is not None:
            found.append(_bwrap_plan(bwrap, box, user))
        found.append(_bwrap_plan(bwrap, box, None))
    if requested in (None, "unprivileged-user") and user is not None:
        found.append(Plan("unprivileged-user", (), user, box, box, clean=("/tmp", "/var/tmp", "/dev/shm")))
    if requested in (None, "process"):
        found.append(Plan("process", (), None, box, box))
    return found


@functools.cache
def can_fork_workers() -> bool:
    """Whether the Linux mechanisms the zygote needs are here: fork, SOCK_SEQPACKET sockets (macOS refuses
    them), descriptor passing, rlimits. Without them the stronger levels cannot start at all."""
    import importlib.util
    import socket

    if not (hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(socket, "SOCK_SEQPACKET")
            and hasattr(os, "setsid") and importlib.util.find_spec("resource") is not None):
        return False
    try:
        ends = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except OSError:
        return False
    for end in ends:
        end.close()
    return True


def _bwrap_plan(bwrap: str, box: str, user: tuple[int, int] | None) -> Plan:
    root = os.geteuid() == 0
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-net",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    if not root:  # an ordinary user gets its namespaces from a user namespace
        args.append("--unshare-user")
        if "--disable-userns" in _bwrap_help(bwrap):
            args.append("--disable-userns")
    args += ["--cap-drop", "ALL"]
    if user is not None:
        # The zygote keeps just what it needs to make workers unprivileged, stop and kill them,
        # and empty the folders they wrote; a worker loses every capability when it switches user.
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_DAC_OVERRIDE", "CAP_FOWNER"):
            args += ["--cap-add", cap]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]
    for path in _ETC_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    args += ["--dev", "/dev", "--proc", "/proc", "--ro-bind-try", "/sys", "/sys"]
    for device in sorted(glob.glob("/dev/nvidia*")):  # CUDA, where there is a GPU
        args += ["--dev-bind", device, device]
    size = ["--size", str(TMPFS_BYTES)] if "--size" in _bwrap_help(bwrap) else []
    for folder in ("/tmp", "/dev/shm"):
        args += [*size, "--perms", "01777", "--tmpfs", folder]
    if "--mqueue" in _bwrap_help(bwrap):  # the sandbox's POSIX message queues, listed for the zygote to remove
        args += ["--mqueue", "/dev/mqueue"]
    made: set[str] = set()
    for path in readable_dirs():
        for parent in reversed(Path(path).parents[:-1]):  # made world-traversable, not 0700 as bwrap would
            if str(parent) not in made and not _under_system(str(parent)):
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", path, path]
    args += ["--bind", box, INSIDE, "--chdir", INSIDE]
    return Plan("bwrap", tuple(args), user, box, INSIDE, clean=("/tmp", "/dev/shm"), clean_all=True)


def _under_system(path: str) -> bool:
    """Whether bwrap has that folder already: a system bind, /dev, /proc, /sys, or a tmpfs mount point.

    Below the private /tmp a folder still has to be made (a checkout in /tmp/ci/...).
    """
    if path in ("/", "/tmp", "/dev/shm"):
        return True
    return any(path == d or path.startswith(d + "/") for d in ("/dev", "/proc", "/sys", *_SYSTEM_DIRS))


def readable_dirs() -> list[str]:
    """What a sandbox must read besides the system: the Python installation, its packages, the engine."""
    candidates = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
                  os.path.dirname(os.path.realpath(sys.executable)), str(_ENGINE_DIR)}
    candidates.update(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
        candidates.add(site.getusersitepackages())
    real = {os.path.realpath(p) for p in candidates if p and os.path.isdir(p)}
    real |= {p for p in candidates if p and os.path.isdir(p) and not os.path.islink(p)}
    # Drop what the system binds cover and folders inside others: one bind each.
    covered = [d for d in _SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    kept: list[str] = []
    for path in sorted(real, key=len):
        if any(path == c or path.startswith(c.rstrip("/") + "/") for c in covered + kept):
            continue
        kept.append(path)
    return kept


@functools.cache
def _bwrap_help(bwrap: str) -> str:
    try:
        return subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def probe_bwrap(plan: Plan, env: dict[str, str]) -> str | None:
    """Run a trivial Python under the plan's bubblewrap; None if it works, else why not."""
    try:
        done = subprocess.run([*plan.prefix, sys.executable, "-S", "-c", ""], env=env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if done.returncode != 0:
        return (done.stderr.strip() or f"exit status {done.returncode}")[-500:]
    return None


def become(user: tuple[int, int]) -> None:
    """Switch this process to the unprivileged (uid, gid) for good, and check that it cannot switch back."""
    uid, gid = user
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise RuntimeError("the worker could switch back to root")
