"""What the watch takes from torch before any student code runs: the profiler's switches as torch made them.

The recorder replaces every module attribute that holds a switch by one that refuses while a window is
armed (recorder.guard_switches); it and the compiled observer's canary call the originals kept here.
This module is imported by the recorder, in every sandbox process before any student code.
"""

from __future__ import annotations

import torch

#: Operator namespaces whose operators are torch's own: what runs inside one is its implementation.
BUILTIN = ("aten", "prims", "quantized", "c10d", "_c10d_functional", "profiler", "torchvision")
#: The profiler's switches, replaced in every module that holds them by ones that refuse while armed.
SWITCHES = ("_enable_record_function", "_toggle_collection_dynamic", "_disable_profiler", "_disable_profiler_legacy",
            "_enable_profiler", "_enable_profiler_legacy", "_prepare_profiler", "_clear_callbacks")
REAL = {name: getattr(torch._C._autograd, name) for name in SWITCHES if hasattr(torch._C._autograd, name)}
#: Whether autograd may run a graph in device threads of its own (thread-local): a watched request turns it off,
#: so that every evaluation runs in the thread that asked for it (recorder.DispatchWatch.armed).
MULTITHREADING = (torch._C._is_multithreading_enabled, torch._C._set_multithreading_enabled)
#: The saved-tensor hooks autograd applies now ((pack, unpack) or None): recorder._SavedTensorHooks checks them.
SAVED_TENSOR_HOOKS = torch._C._autograd._top_saved_tensors_default_hooks
