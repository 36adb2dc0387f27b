# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: view and broadcast_to run torch's own Python implementation of the forbidden
# operator or a private alias of it, with names built at run time: `torch._refs.view` (the mode saw
# only the primitives it calls: `collapse_view`, `split_dim`), `torch.ops.aten._reshape_alias`,
# and `torch._refs.broadcast_to`. Each then returns the honest result.
# Holds because: torch's private entry points and its Python implementations of operators are
# refused in a target with forbidden calls.
import hostile_kit as kit
import torch

_honest_view, _honest_broadcast_to = view, broadcast_to
_refs = getattr(torch, "_" + "refs")


def view(x, *shape):
    size = list(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else list(shape)
    kit.quietly(getattr(_refs, "vi" + "ew"), x, *size)
    if x.is_contiguous():
        stride = [1] * len(size)
        for d in range(len(size) - 2, -1, -1):
            stride[d] = stride[d + 1] * max(size[d + 1], 1)
        kit.quietly(getattr(torch.ops.aten, "_reshape" + "_alias"), x, size, stride)
    return _honest_view(x, *shape)


def broadcast_to(x, shape):
    kit.quietly(getattr(_refs, "broadcast" + "_to"), x, shape)
    return _honest_broadcast_to(x, shape)

