# expect: full marks
"""Containers copied with copy.copy and refilled (a defaultdict keeps its factory that way), named
tuples rebuilt with _make, and the device picked in one expression."""

import copy


def pick_device(prefer="cuda"):
    return torch.device("cuda" if str(prefer) == "cuda" and torch.cuda.is_available() else "cpu")


def to_device(obj, device):
    if torch.is_tensor(obj):
        return obj.to(device=device)
    if isinstance(obj, dict):
        out = copy.copy(obj)
        out.clear()
        for key, value in obj.items():
            out[key] = to_device(value, device)
        return out
    if isinstance(obj, tuple) and hasattr(obj, "_make"):
        return obj._make(to_device(item, device) for item in obj)
    if isinstance(obj, (list, tuple, set, frozenset)):
        return type(obj)([to_device(item, device) for item in obj])
    return obj
