"""The reference's outcomes, kept between runs of `torchgrade check` on one machine.

Each check runs its probe on the reference and on the student's code. The reference side depends
only on the course, so an author or instructor who runs `check` again (or grades one submission)
would compute it again for nothing: about a third of a whole-assignment check on a 2-core machine.
This cache keeps what one run computed (`differential.recording`) in one file per key, where the key
is a digest of everything an outcome depends on: every file of the course that grading reads
(`fingerprint.grader_key`: the assignment, checks, reference, probes and hints, torchgrade's version and
the device choice), the versions of torch and Python, the CPU's instruction set torch uses and the
GPUs present. `torchgrade gradescope`'s build records them once for every submission (`ensure`).

The file holds the key it was written for and an HMAC-SHA256 of its contents under a secret of the
cache folder's (``secret``, 0600 in a 0700 folder): a file that is damaged, truncated, of another
format, for another key or signed without the secret (written by anyone but torchgrade) is ignored and
written anew, never trusted. Its contents are decoded by the sandbox's loader (`wire.decode`), which
runs no code. At isolation level ``process`` the student's code runs as this user and could read the
secret and write the folder, so there the cache is neither read nor written, and the secret and every
file are removed afterwards: nothing the code wrote or learned there is trusted later, at any level.
A student bundle has no reference (its outcomes are recorded in it) and needs none of this.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import platform
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from torchgrade.base.paths import cache_dir
from torchgrade.engine.config import Assignment
from torchgrade.engine.fingerprint import grader_key

FORMAT = b"torchgrade reference outcomes 2\n"
#: Levels at which the student's code runs as this user: no cache there (module docstring).
_UNTRUSTED_LEVELS = ("process", "none")


def _hardware() -> str:
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] \
        if torch.cuda.is_available() else []
    return f"{platform.machine()}|{torch.backends.cpu.get_cpu_capability()}|{','.join(gpus)}"


def key(assignment: Assignment, device: str) -> str:
    """A digest of everything the reference's outcomes depend on."""
    import torch

    parts = (grader_key(assignment, device=device), torch.__version__, "{}.{}".format(*sys.version_info[:2]),
             _hardware())
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _path(cache_key: str, folder: Path | None = None) -> Path:
    return (folder or cache_dir()) / f"reference-{cache_key}.bin"


def _secret(folder: Path, make: bool) -> bytes | None:
    """The folder's signing secret (made, 0600 in a 0700 folder, when `make` and missing); None if there is none."""
    path = folder / "secret"
    with contextlib.suppress(OSError):
        data = path.read_bytes()
        if len(data) == 32:
            return data
    if not make:
        return None
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.chmod(0o700)
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
        return _secret(folder, make=False)
    return None


def _signature(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()


def forget(folder: Path | None = None) -> None:
    """Remove the secret and every cached file: after a run at a level where student code could touch them."""
    folder = folder or cache_dir()
    for path in (folder / "secret", *folder.glob("reference-*.bin"), *folder.glob(".reference-*")):
        with contextlib.suppress(OSError):
            path.unlink()


def load(cache_key: str, folder: Path | None = None) -> dict[str, dict[str, dict]]:
    """The outcomes cached for this key, or {} when there are none that can be trusted."""
    from torchgrade.sandbox import wire

    secret = _secret(folder or cache_dir(), make=False)
    try:
        data = _path(cache_key, folder).read_bytes()
    except OSError:
        return {}
    head, digest, payload = data[:len(FORMAT)], data[len(FORMAT):len(FORMAT) + 32], data[len(FORMAT) + 32:]
    if secret is None or head != FORMAT or not hmac.compare_digest(_signature(secret, payload), digest):
        return {}
    try:
        content = wire.decode(payload)
    except wire.WireError:
        return {}
    if not isinstance(content, dict) or content.get("key") != cache_key or not isinstance(content.get("outcomes"), dict) \
            or not all(isinstance(v, dict) for v in content["outcomes"].values()):
        return {}
    return content["outcomes"]


def save(cache_key: str, outcomes: dict[str, dict[str, dict]], folder: Path | None = None) -> None:
    """Write the outcomes for this key in one piece (a reader never sees half a file); a cache that
    cannot be written is not an error."""
    from torchgrade.sandbox import wire

    payload = wire.encode({"key": cache_key, "outcomes": outcomes})
    folder = folder or cache_dir()
    secret = _secret(folder, make=True)
    if secret is None:
        return
    with contextlib.suppress(OSError):
        fd, partial = tempfile.mkstemp(prefix=".reference-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(FORMAT + _signature(secret, payload) + payload)
            os.replace(partial, _path(cache_key, folder))
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)


@contextlib.contextmanager
def kept(assignment: Assignment, device: str, level: str, folder: Path | None = None) -> Iterator[None]:
    """Inside the block, the reference's outcomes come from the cache (in `folder`, else `cache_dir()`)
    where it has them; what the block computes anew is added to it afterwards. At isolation `level`
    process, no cache: it is emptied afterwards instead (module docstring)."""
    from torchgrade.engine.differential import adopt_reference_outcomes, recording

    if not assignment.reference_dir.is_dir():  # a student bundle: its outcomes are recorded in it
        yield
        return
    if level in _UNTRUSTED_LEVELS:
        try:
            yield
        finally:
            forget(folder)
        return
    cache_key = key(assignment, device)
    cached = load(cache_key, folder)
    adopt_reference_outcomes(assignment.reference_dir, cached)
    with recording() as recorded:
        yield
    new = {exercise: {k: v for k, v in outcomes.items() if k not in cached.get(exercise, {})}
           for exercise, outcomes in recorded.items()}
    if any(new.values()):
        save(cache_key, {e: {**cached.get(e, {}), **new.get(e, {})} for e in set(cached) | set(new)}, folder)


def ensure(assignment: Assignment, device: str, folder: Path) -> str:
    """The reference's outcomes for every check, from `folder` if it holds them for this key, else
    recorded now (a round of the checks on the reference alone, before any student code) and kept
    there; either way taken in by this process. What happened, in a few words."""
    from torchgrade.engine.session import shared
    from torchgrade.engine.differential import adopt_reference_outcomes, recording

    cache_key = key(assignment, device)
    outcomes = load(cache_key, folder)
    state = "reused"
    if not outcomes:
        with recording(reference_only=True) as outcomes:
            shared(assignment, device, ()).grade(assignment.reference_dir)
        save(cache_key, outcomes, folder)
        state = "recorded" if _path(cache_key, folder).is_file() else "not kept: computed here"
    adopt_reference_outcomes(assignment.reference_dir, outcomes)
    return state
