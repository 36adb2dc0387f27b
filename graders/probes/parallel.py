"""Probes for parallel.py: a batch that is a named tuple (a named tuple cannot cross the sandbox boundary)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from torchgrade.probes import Target, probe

#: The named tuple a check's batch is rebuilt as, on both sides of the boundary.
Batch = namedtuple("Batch", ["inputs", "labels"])


@probe
def named_batch(target: Target, args: tuple, kwargs: dict) -> dict:
    """Call the target with args[0] (a tuple of tensors) as a ``Batch`` named tuple; describe the result as
    plain data: its type's name, whether it is that same named tuple, its field names and its items."""
    out = target(Batch(*args[0]), *args[1:], **kwargs)
    same = type(out) is Batch
    return {"type": type(out).__name__, "is_the_same_named_tuple": same,
            "fields": list(out._fields) if same else None,
            "items": list(out) if isinstance(out, (tuple, list)) else out}
