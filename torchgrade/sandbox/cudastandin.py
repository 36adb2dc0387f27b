"""The compiled CUDA stand-in (``cudastandin.cpp``): EXPERIMENTAL, opt-in, not used by any grading yet.

The Python stand-in (``standin.py``) runs every operator of a CUDA check through a Python handler
(~40 µs an operator against ~8 µs on the CPU). This one does the same work at torch's dispatcher in
C++, on a torch built without CUDA:

- a boxed fallback on the CUDA dispatch key applies CUDA's placement rules (docs/devices.md, the rules
  of ``standin._place``: one device, CPU tensors of zero dimensions allowed as inputs, CPU indices for a
  tensor on the GPU, ``copy_``/``_to_copy`` crossing) and runs the operator's CPU kernel on CPU aliases of
  the same memory; what it returns lands on ``cuda:0`` (views as views of the CUDA tensor, with its
  keys: torch's rule under ``inference_mode``), and an argument the kernel resized (``resize_``,
  ``out=``) takes its new memory;
- a one-device CUDA guard (so ``.to("cuda")`` means ``cuda:0`` and autograd has a device for its CUDA
  thread), an allocator of CPU memory labelled ``cuda:0``;
- ``enable()``: torch's Python bindings no longer initialise CUDA for ``device="cuda"``.

So tensors are ``cuda:0`` to torch itself, C++ included: ``x.is_cuda()`` in torch's own composites,
the autograd engine's device threads, ``repr`` and ``.numpy()``'s error are a GPU's.

Once loaded it cannot be unloaded: it is loaded only in a process of its own (a sandbox worker, a
test's subprocess), never in the one that decides a score. Built like the compiled observer
(``observer.py``): into ``<cache>/cudastandin/<key>/`` keyed by torch, Python, platform and the
source's digest; ``python -m torchgrade.sandbox.cudastandin`` builds it and says where.

What it does not do yet (docs/devices.md, "The compiled stand-in"): it is not wired into the sandbox;
CUDA-only kernels that torch's composites pick when ``is_cuda()`` (``_conv_depthwise2d``, the fused
RNN cells) have no CPU kernel to run; ``torch.Generator("cuda")`` and ``torch.cuda.*`` still raise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from torchgrade.sandbox import cppbuild

SOURCE = Path(__file__).with_name("cudastandin.cpp")
NAME = "_torchgrade_cudastandin"
#: Set (for tests) to a library path to load instead of the cached build, or to "off" for none.
ENV_VAR = "TORCHGRADE_CUDASTANDIN"
#: The name reports give it.
COMPILED = "compiled stand-in"
#: The stand-in loaded in this process and proven by the canary, else None.
module: Any = None


BuildError = cppbuild.BuildError
# (it needs torch's Python library too, for ``set_requires_device_init``, unlike the observer)
_EXTENSION = cppbuild.Extension("cudastandin", SOURCE, NAME, ENV_VAR, header="torch/csrc/utils/device_lazy_init.h",
                                libraries=("c10", "torch_cpu", "torch", "torch_python"), timeout=900)
#: Where the build for this torch, Python, platform and source lives; the library, where one is built.
folder, built = _EXTENSION.folder, _EXTENSION.built


def build() -> Path:
    """Compile the stand-in into its cache folder (once); its path. Raises BuildError."""
    import torch

    if built() is None and (torch.cuda.is_available() or torch.version.cuda is not None):
        raise BuildError("this torch has CUDA: the stand-in is for torch built without it")
    return _EXTENSION.build()


def load(path: str | os.PathLike | None = None) -> Any:
    """Load the stand-in (`path`, else the built one) into this process for good, and prove it; the module,
    or None. Only in a process of its own, and before ``import torch``: torch._C asks for CUDA's hooks once,
    as it initialises, and autograd needs the stand-in's (the accelerator's current stream)."""
    global module
    if module is not None:
        return module
    path = path if path is not None else built()
    if not path or "torch" in sys.modules:
        return None
    import ctypes
    import importlib.machinery
    import importlib.util

    try:
        ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)  # (its static registrations, before torch._C's start)
        loader = importlib.machinery.ExtensionFileLoader(NAME, str(path))
        spec = importlib.util.spec_from_loader(NAME, loader)
        loaded = importlib.util.module_from_spec(spec)
        loader.exec_module(loaded)
        loaded.enable()
        _storages()
        module = loaded if loaded.ready() and canary() else None
    except Exception:  # (an ABI mismatch, a library that is not one: the Python stand-in grades)
        module = None
    return module


def _storages() -> None:
    """``UntypedStorage.clone`` (``copy.deepcopy`` of a tensor) of a storage on cuda:0: torch's Python storage
    constructor knows no CUDA on a CPU build, so the copy is made by an operator instead."""
    import torch

    original = torch.UntypedStorage.clone

    def clone(self: torch.UntypedStorage) -> torch.UntypedStorage:
        if self.device.type != "cuda":
            return original(self)
        return torch.empty(self.nbytes(), dtype=torch.uint8, device=self.device).untyped_storage().copy_(self)

    torch.UntypedStorage.clone = clone


def canary() -> bool:
    """Whether tensors made with device="cuda" are cuda:0, compute, and refuse CPU company as CUDA does."""
    import torch

    x = torch.ones(2, device="cuda")
    y = (x + 1) * torch.tensor(2.0)
    try:
        x + torch.ones(2)
    except RuntimeError:
        mixed = True
    else:
        mixed = False
    return y.device == torch.device("cuda", 0) and y.cpu().tolist() == [4.0, 4.0] and mixed


def name() -> str:
    """The stand-in this process uses, as reports name it."""
    return COMPILED if module is not None else "Python stand-in"


if __name__ == "__main__":  # python -m torchgrade.sandbox.cudastandin: build now, say where
    cppbuild.build_and_say(build, "compiled stand-in")
