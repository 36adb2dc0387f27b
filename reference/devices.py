"""Devices and CUDA: choosing a device and moving nested batches of tensors onto it.

(设备与 CUDA：选择计算设备，并把嵌套结构中的所有张量移动到该设备上。)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Union

import torch


def pick_device(prefer: str = "cuda") -> torch.device:
    """``torch.device("cuda")`` when ``prefer`` is ``"cuda"`` and CUDA is available, else CPU.

    当 ``prefer`` 为 ``"cuda"`` 且 CUDA 可用时返回 ``torch.device("cuda")``，否则返回 CPU 设备。

    The notes' ``torch.device("cuda" if torch.cuda.is_available() else "cpu")``, written
    correctly: ``torch.cuda.is_available`` must be *called* (the bare function object is
    always truthy), and the fallback is ``torch.device("cpu")``, not a bare name ``cpu``.
    The result is always a ``torch.device`` (``"cuda"`` without an index: the current CUDA
    device). Any other ``prefer`` (``"cpu"``, ``"mps"``, ...) gives the CPU. Which GPUs are
    visible is chosen outside Python with the environment variable ``CUDA_VISIBLE_DEVICES``
    (plural), before CUDA is first used.

    Example::

        >>> pick_device("cpu")
        device(type='cpu')
        >>> expected = "cuda" if torch.cuda.is_available() else "cpu"
        >>> pick_device() == torch.device(expected)
        True

    Forbidden: nothing.
    """
    # BEGIN SOLUTION
    if str(prefer) == "cuda" and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")
    # END SOLUTION


def to_device(obj: Any, device: Union[str, torch.device]) -> Any:
    """Move every tensor in nested lists, tuples, dicts and sets to ``device``, keeping the types.

    把嵌套的 list、tuple、dict、set 中的每个张量都移动到 ``device``，并保持原有的容器类型。

    Recursive, by the type of ``obj``:

    * a ``torch.Tensor`` (``nn.Parameter`` included): ``obj.to(device)``, which returns
      ``obj`` itself when it is already there (as ``Tensor.to`` does);
    * a ``list`` / ``tuple``: the same type with every item converted; a named tuple is
      rebuilt as its own class (``type(obj)(*items)``, since its constructor takes the fields
      as separate arguments), other tuples (plain, ``torch.return_types``) with
      ``type(obj)(items)``;
    * a ``dict`` (``OrderedDict``, ``defaultdict`` with its ``default_factory``, ...): the
      same type, the same keys in the same order (keys are not moved), converted values;
    * a ``set`` / ``frozenset``: the same type with converted items;
    * anything else (numbers, strings, ``None``, ``nn.Module`` objects, ...) is returned as
      it is, unchanged. Containers are always new objects: the input is never modified.
      Self-referencing containers are not supported (the recursion would not end).

    Example::

        >>> from collections import namedtuple
        >>> Batch = namedtuple("Batch", ["x", "y"])
        >>> batch = Batch(torch.ones(2), [torch.zeros(1), 3])
        >>> out = to_device({"batch": batch, "name": "a"}, "cpu")
        >>> out
        {'batch': Batch(x=tensor([1., 1.]), y=[tensor([0.]), 3]), 'name': 'a'}
        >>> type(out["batch"]).__name__, out["batch"].x.device
        ('Batch', device(type='cpu'))

    Forbidden: nothing.
    """
    # BEGIN SOLUTION
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        items = [to_device(item, device) for item in obj]
        if hasattr(obj, "_fields"):  # a named tuple: fields are positional arguments
            return type(obj)(*items)
        return type(obj)(items)
    if isinstance(obj, list):
        return type(obj)(to_device(item, device) for item in obj)
    if isinstance(obj, dict):
        pairs = [(key, to_device(value, device)) for key, value in obj.items()]
        if isinstance(obj, defaultdict):
            return type(obj)(obj.default_factory, pairs)
        return type(obj)(pairs)
    if isinstance(obj, (set, frozenset)):
        return type(obj)(to_device(item, device) for item in obj)
    return obj
    # END SOLUTION
