"""The compiled watch: a RecordFunction observer (``observer.cpp``) in place of a Kineto session.

``recorder.DispatchWatch`` needs, for each watched request, what ran at torch's dispatcher inside the
student's windows (and in every other thread). Starting and stopping Kineto around each request costs
~0.35 ms for an empty request and ~2.2 ms for one of ~120 operators; ``observer.cpp`` registers a global
RecordFunction callback while a request is armed and computes online what ``recorder.Findings`` computes
from Kineto's event tree afterwards, at about 1 µs per request and a fraction of a µs per operator.

Where it comes from (the trusted side only; the sandbox never compiles or writes it):

- ``build()`` compiles it with the system's C++ compiler against torch's own headers into
  ``<cache>/observer/<key>/``, where the key names torch's version, Python's ABI, the platform and the
  source's digest. ``torchgrade observer build`` runs it (the Gradescope autograder's setup.sh and CI do).
- Otherwise the first grading that finds none starts ``build()`` in a detached process and grades with
  Kineto meanwhile: the compile takes 6 s of CPU (15-20 s on a busy 2-core machine), longer than a
  student's whole ``check`` is worth waiting for.
- At level ``process`` (the portable backend) the profiler watches, and the cached build is removed before
  and after (``forget``): the student's code runs as this user there and could have replaced it.
- ``sealed()``: the host copies the built library into a sealed memfd, handed to the zygote (no path of
  the host's inside bwrap, nothing anyone can change after the host read it), which loads it before any
  student code (``load``) and proves it with a canary: an operator inside a window it must report. A
  library that is missing, fails to load or misses the canary leaves ``module`` None: Kineto watches.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from torchgrade.sandbox import cppbuild

SOURCE = Path(__file__).with_name("observer.cpp")
NAME = "_torchgrade_observer"
#: Set (for tests) to a library path to load instead of the cached build, or to "off" for none.
ENV_VAR = "TORCHGRADE_OBSERVER"
#: The names reports give the watch in use.
COMPILED, PROFILER = "compiled observer", "profiler"
#: A background build still running after this long is taken for dead (its lock is stale).
_STALE_S = 600
#: The observer loaded in this (sandbox) process and proven by the canary, else None.
module: Any = None
#: Its functions, kept by the grader (recorder.guard_switches puts guards in the module's place).
functions: dict[str, Any] = {}


BuildError = cppbuild.BuildError
_EXTENSION = cppbuild.Extension("observer", SOURCE, NAME, ENV_VAR, header="ATen/record_function.h",
                                libraries=("c10", "torch_cpu"), timeout=600)
#: Where the build for this torch, Python, platform and source lives; the library, where one is built;
#: compiling it there (once).
folder, built, build = _EXTENSION.folder, _EXTENSION.built, _EXTENSION.build


def build_later() -> None:
    """Start `build()` in a detached process, unless one runs or failed for this key (trusted side)."""
    try:
        where = folder()
        where.mkdir(parents=True, exist_ok=True)
        lock = where / "building"
        with contextlib.suppress(OSError):
            if time.time() - lock.stat().st_mtime > _STALE_S:
                lock.unlink()
        if (where / "failed").exists():
            return  # (`torchgrade observer build` tries again and says why)
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except (OSError, ImportError):
        return
    code = ("import sys\nfrom pathlib import Path\nfrom torchgrade.sandbox import observer\nwhere = Path(sys.argv[1])\n"
            "try:\n    observer.build()\nexcept observer.BuildError as e:\n    (where / 'failed').write_text(str(e))\n"
            "finally:\n    (where / 'building').unlink()\n")
    with contextlib.suppress(OSError):
        subprocess.Popen([sys.executable, "-c", code, str(where)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def sealed() -> int | None:
    """A sealed memfd holding the built observer, for the zygote (its fd, inheritable), else None: then
    a build is started for next time. Trusted side, Linux only."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        path = built()
        if path is None:
            if not os.environ.get(ENV_VAR):
                build_later()
            return None
        data = path.read_bytes()
    except (OSError, ImportError):
        return None
    import fcntl

    fd = os.memfd_create("torchgrade-observer", os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    except OSError:
        os.close(fd)
        return None
    return fd


def forget() -> None:
    """Remove the cached build (not one named by TORCHGRADE_OBSERVER, the operator's own): around a run at level
    process, whose student code runs as this user, so that nothing it could have written is loaded later."""
    if not os.environ.get(ENV_VAR):
        with contextlib.suppress(OSError, ImportError):
            shutil.rmtree(folder(), ignore_errors=True)


def load(path: str | None) -> Any:
    """Load the observer the host names (its sealed fd as /proc/self/fd/N, or at level process its cached
    path), before any student code, and prove it; the module, or None (Kineto then watches)."""
    global module
    module = None
    functions.clear()
    if not path:
        return None
    import importlib.machinery
    import importlib.util

    try:
        loader = importlib.machinery.ExtensionFileLoader(NAME, path)
        spec = importlib.util.spec_from_loader(NAME, loader)
        loaded = importlib.util.module_from_spec(spec)
        loader.exec_module(loaded)
        if canary(loaded):
            module = loaded
            functions.update({f: getattr(loaded, f) for f in ("arm", "collect", "enter", "leave")})
            if hasattr(loaded, "profile"):  # (the recorder's hook filtered in C: recorder._callbacks)
                functions["profile"] = loaded.profile
    except Exception:  # (an ABI mismatch, a library that is not one, one without these functions: Kineto watches)
        module = None
    finally:
        if path.startswith("/proc/self/fd/"):
            with contextlib.suppress(OSError, ValueError):
                os.close(int(path.rsplit("/", 1)[1]))
    return module


def canary(observer: Any) -> bool:
    """Whether `observer` sees what Findings would: an operator in a window, none outside it, a window whole."""
    import torch

    from torchgrade.sandbox.originals import BUILTIN as _BUILTIN, REAL as _REAL

    window, seen = "torchgrade::watch::canary", "torchgrade::seen::canary"
    x = torch.ones(2)
    try:
        observer.arm(window, seen, _BUILTIN)
        _REAL["_enable_record_function"](False)
        torch.sin(x)  # the probe's own work: not the student's
        _REAL["_enable_record_function"](True)
        token = observer.enter(window)
        torch.neg(x)
        observer.leave(token)
    finally:
        names, windows, markers, _, armed = observer.collect()
        _REAL["_enable_record_function"](True)
    return names == ["neg"] and windows == 1 and markers == 0 and armed


def name() -> str:
    """The watch this sandbox process uses, as reports name it."""
    return COMPILED if module is not None else PROFILER


if __name__ == "__main__":  # python -m torchgrade.sandbox.observer: build now, say where
    cppbuild.build_and_say(build, "compiled observer")
