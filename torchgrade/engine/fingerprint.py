"""The grader key: a hash of everything that decides a grade other than the submission itself.

torchgrade's version, the assignment file, the checks and the probes they run, the reference, the
course's hints, the device choice and the GPUs it would use. The ledger compares it to skip what a
re-run would grade alike (torchgrade/classroom/ledger.py); the reference's outcomes are cached under it
(torchgrade/engine/refcache.py).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

from torchgrade.base.paths import PACKAGE
from torchgrade.base.version import __version__
from torchgrade.engine.config import Assignment

_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache"}
_PROBES_DIR = PACKAGE / "sandbox" / "probes"


def _hash_tree(digest: "hashlib._Hash", root: Path, label: str, suffixes: tuple[str, ...] = ()) -> None:
    """Feed every file under root (sorted by relative path) into the digest."""
    if not root.exists():
        digest.update(f"{label}: missing\0".encode())
        return
    files = [root] if root.is_file() else sorted(
        p for p in root.rglob("*") if p.is_file() and not _SKIP_DIRS.intersection(p.relative_to(root).parts)
        and (not suffixes or p.suffix in suffixes))
    for path in files:
        rel = path.relative_to(root).as_posix() if path != root else path.name
        digest.update(f"{label}/{rel}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())


def gpus_seen() -> str:
    """The GPUs this machine shows to torch, told without starting CUDA (a process forked after that could
    not use it): its GPU device nodes, and what CUDA_VISIBLE_DEVICES leaves."""
    from torchgrade.sandbox.isolation import gpu_device_nodes

    nodes = len(gpu_device_nodes())
    return f"{nodes}:{os.environ.get('CUDA_VISIBLE_DEVICES', '*')}" if nodes else "0"


def grader_key(assignment: Assignment, *, device: str = "all", include_hidden: bool = True,
               only: Iterable[str] = ()) -> str:
    """A hash of everything that decides a grade, other than the submission itself."""
    digest = hashlib.sha256(f"torchgrade {__version__}\0device={device}\0hidden={include_hidden}\0"
                            f"only={','.join(sorted(only))}\0".encode())
    # TORCHGRADE_CUDA_STANDIN overrides the course's cuda_standin for one run (the course's own setting is
    # in assignment.yaml, hashed below): grades made under another policy are not this grader's.
    override = os.environ.get("TORCHGRADE_CUDA_STANDIN", "").strip().lower()
    if override:
        digest.update(f"cuda_standin={override}\0".encode())
    if device != "cpu":  # what a GPU graded is not what the stand-in (or nothing) graded on a machine without one
        digest.update(f"gpus={gpus_seen()}\0".encode())
    _hash_tree(digest, assignment.path, "assignment")
    _hash_tree(digest, assignment.checks_dir, "checks", (".py", ".ini", ".cfg", ".toml", ".yaml", ".json"))
    _hash_tree(digest, assignment.reference_dir, "reference", (".py",))
    _hash_tree(digest, _PROBES_DIR, "probes", (".py",))  # the scenarios the checks run
    _hash_tree(digest, assignment.probes_dir, "course probes", (".py",))  # and the course's own
    _hash_tree(digest, assignment.hints_file, "hints")  # what a failing check's report says
    return digest.hexdigest()[:32]
