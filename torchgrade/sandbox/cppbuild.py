"""Building the sandbox's C++ extensions (the compiled observer, the compiled CUDA stand-in) into the user's
cache: one folder per torch version, Python, platform and source digest, written whole or not at all."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchgrade.base.paths import cache_dir

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


class BuildError(Exception):
    """An extension cannot be compiled here (no compiler, no headers, a compile error)."""


@dataclass(frozen=True)
class Extension:
    """One C++ extension: its cache folder's name, source, module name, the variable that overrides its
    build ("off": none), a header of torch's it needs, the libraries it links and the compile's time limit."""

    kind: str
    source: Path
    name: str
    env_var: str
    header: str
    libraries: Sequence[str]
    timeout: float

    def folder(self) -> Path:
        """Where the build for this torch, Python, platform and source lives."""
        from importlib import metadata

        digest = hashlib.sha256(self.source.read_bytes()).hexdigest()[:12]  # (torch's version, not importing it)
        key = f"torch-{metadata.version('torch')}-{sys.implementation.cache_tag}-{sysconfig.get_platform()}-{digest}"
        return cache_dir() / self.kind / key.replace(os.sep, "_")

    def built(self) -> Path | None:
        """The compiled library, where one exists (or the one `env_var` names)."""
        override = os.environ.get(self.env_var)
        if override:
            return None if override == "off" else Path(override)
        path = self.folder() / f"{self.name}{SUFFIX}"
        return path if path.is_file() else None

    def build(self) -> Path:
        """Compile it into its cache folder (once); its path. Raises BuildError."""
        return self.built() or _compile_into(self.folder() / f"{self.name}{SUFFIX}", self.source, header=self.header,
                                             libraries=self.libraries, timeout=self.timeout)


def build_and_say(build: Callable[[], Path], what: str) -> None:
    """`python -m` of an extension's module: build it now and print where, or say why not and exit 1."""
    try:
        print(build())
    except BuildError as e:
        print(f"torchgrade: the {what} cannot be built here: {e}", file=sys.stderr)
        sys.exit(1)


def _compile_into(target: Path, source: Path, *, header: str, libraries: Sequence[str], timeout: float) -> Path:
    """Compile `source` against torch's headers (`header` must be among them) and libraries into `target`."""
    import torch
    from torch.utils import cpp_extension

    compiler = os.environ.get("CXX") or "c++"
    if shutil.which(compiler) is None:
        raise BuildError(f"no C++ compiler ({compiler}) on PATH")
    includes = cpp_extension.include_paths()
    if not any((Path(p) / header).is_file() for p in includes):
        raise BuildError("torch's C++ headers are not installed")
    target.parent.mkdir(parents=True, exist_ok=True)
    paths = cpp_extension.library_paths()
    fd, partial = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    command = [compiler, "-O2", "-shared", "-fPIC", "-std=c++20", "-w",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
               *(f"-I{p}" for p in includes), f"-I{sysconfig.get_paths()['include']}", str(source),
               *(f"-L{p}" for p in paths), *(f"-l{lib}" for lib in libraries),
               *(f"-Wl,-rpath,{p}" for p in paths), "-o", partial]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise BuildError(f"the compile failed: {(done.stderr or done.stdout).strip()[-2000:]}")
        os.replace(partial, target)  # (a reader never sees half a library)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"the compile could not run: {e}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(partial)
    return target
