# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: one_hot's forbidden operator inside a closure of torch's own given to saved_tensors_hooks as it is
# (save_on_cpu's `pack_to_cpu`, accepted: its code is torch's), whose captured `device_module` the student sets from
# Python (`__closure__[i].cell_contents`) to a namespace whose `is_available` is a partial over C builtins. Autograd
# calls `pack` inside the multiplication the mode saw, where torch's work is not recorded.
# Holds because: at each call the mode sees while saved-tensor hooks are in force, a closure of torch's among them
# must hold only what torch's code would put there (installed_state: plain data, installed modules, functions and
# classes); one that holds anything else is a refused entry. It forged 2.5 of one_hot's 3 points before (issue 47).
import types

import torch

import hostile_kit as kit


def one_hot(labels, num_classes=-1):
    n = num_classes if num_classes != -1 or not labels.numel() else int(labels.max()) + 1
    if not labels.numel():
        return torch.empty(*labels.shape, max(n, 0), dtype=torch.int64)
    is_available, out = kit.frameless_chain((getattr(torch._C._nn, "one" + "_hot"), labels, n))
    hooks = torch.autograd.graph.save_on_cpu(pin_memory=True, device_type="cpu")
    for cell in hooks.pack_hook.__closure__:
        if isinstance(cell.cell_contents, types.ModuleType):
            cell.cell_contents = types.SimpleNamespace(is_available=is_available)
    src = torch.ones(2, requires_grad=True)
    with hooks:
        src * src
    return out[0]
