"""Data-parallel training: by hand with ``torch.distributed``, then with PyTorch's DDP wrapper.

(数据并行训练：用 torch.distributed 手写切分数据、同步参数、平均梯度，再对照 DistributedDataParallel。)

Where a function below lists forbidden calls, it may not use numpy or another array library either,
not even on copies of its values (`x.tolist()`): what they compute cannot be watched.
(列出禁用调用的函数也不得使用 numpy 或其他数组库，即使作用于数值的副本：它们的计算无法被监视。)
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import torch
import torch.distributed as dist
from torch import nn


# BEGIN REMOVE
def _shard_tensor(tensor: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s contiguous block of ``tensor`` along dim 0 (a view)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"shard: expected a tensor, got {type(tensor).__name__}")
    if tensor.dim() == 0:
        raise ValueError("shard: a 0-dim tensor has no dim 0 to split")
    size = tensor.size(0)
    if size % world_size != 0:
        raise ValueError(
            f"shard: dim 0 has size {size}, which is not divisible by world_size={world_size}"
        )
    per_rank = size // world_size
    return tensor.narrow(0, rank * per_rank, per_rank)


def _in_place(collective: Callable[[torch.Tensor], Any], tensor: torch.Tensor) -> None:
    """Run an in-place collective on ``tensor``, through a contiguous buffer when it is not."""
    if tensor.is_contiguous():
        collective(tensor)
    else:
        buffer = tensor.contiguous()
        collective(buffer)
        tensor.copy_(buffer)
# END REMOVE


def shard(batch: Any, rank: int, world_size: int) -> Any:
    """Rank ``rank``'s contiguous slice along dim 0 of a tensor, or of every tensor in a tuple.

    取出第 ``rank`` 个进程负责的那一段数据：沿第 0 维把张量（或元组中的每个张量）均分成 ``world_size`` 段。

    Dim 0 of size ``n`` is cut into ``world_size`` equal blocks of ``k = n // world_size``
    rows; rank ``r`` gets rows ``r*k`` to ``(r+1)*k - 1`` (a view of the input, no copy).
    This is the "split the data, same model on every device" of the notes' data parallelism.
    Every rank holds the same global batch and keeps a different block, so the blocks of all
    ranks, concatenated in rank order, are the whole batch. ``batch`` is a tensor, or a tuple
    (or list, as a ``DataLoader`` yields) of tensors, each cut the same way; the result has
    the same container type (a named tuple stays that named tuple). Needs no process group.

    Errors: ``ValueError`` when a size is not divisible by ``world_size`` (equal shards keep
    the mean of the per-rank mean losses equal to the global mean), when ``world_size < 1``
    or ``rank`` is not in ``[0, world_size)``, or for a 0-dim tensor; ``TypeError`` for an
    item that is not a tensor.

    Example::

        >>> x, y = torch.arange(8).view(4, 2), torch.tensor([0, 1, 0, 1])
        >>> shard(x, rank=1, world_size=2)
        tensor([[4, 5],
                [6, 7]])
        >>> shard((x, y), rank=0, world_size=2)[1]
        tensor([0, 1])
        >>> shard(torch.arange(5), 0, 2)
        Traceback (most recent call last):
            ...
        ValueError: shard: dim 0 has size 5, which is not divisible by world_size=2

    Forbidden: ``DistributedDataParallel``, ``DataParallel``, ``DistributedSampler``.
    """
    # BEGIN SOLUTION
    if world_size < 1:
        raise ValueError(f"shard: world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"shard: rank must be in [0, {world_size}), got {rank}")
    if isinstance(batch, (tuple, list)):
        items = [_shard_tensor(item, rank, world_size) for item in batch]
        if hasattr(batch, "_fields"):  # a named tuple
            return type(batch)(*items)
        return type(batch)(items)
    return _shard_tensor(batch, rank, world_size)
    # END SOLUTION


def broadcast_parameters(model: nn.Module, src: int = 0) -> None:
    """Make every parameter and buffer of ``model`` equal to rank ``src``'s, in place.

    把 ``model`` 的每个参数和缓冲区（buffer）都同步为 ``src`` 号进程上的值（原地修改）。

    Called on every rank before training, so that all replicas start from the same weights
    (each process initialised its model from its own random state). For every tensor of
    ``model.parameters()`` and then of ``model.buffers()`` (BatchNorm's running statistics,
    ``num_batches_tracked`` ...), ``dist.broadcast(tensor, src)`` overwrites it with rank
    ``src``'s value. Both iterators have a fixed order (registration order, shared tensors
    once), so every rank issues the same collectives in the same order; a different order or
    count on one rank deadlocks or mixes tensors up. A tensor that is not contiguous (a
    parameter made from a strided slice such as ``w[:, ::2]``) is broadcast through a
    contiguous copy that is then copied back into it: on gloo a collective on a strided tensor
    silently gives wrong values. The copies are made under
    ``torch.no_grad()`` and in place: each parameter stays the same leaf tensor (an optimizer
    built on it still updates it). Frozen parameters (``requires_grad=False``) are copied too.
    Returns ``None``.

    Example::

        >>> # on every rank of a 2-process gloo group; rank r built nn.Linear(2, 1) with seed r
        >>> broadcast_parameters(model, src=0)  # doctest: +SKIP
        >>> model.weight  # on rank 0 and on rank 1: rank 0's initial weight  # doctest: +SKIP
        Parameter containing:
        tensor([[-0.0053,  0.3793]], requires_grad=True)

    Forbidden: ``DistributedDataParallel``, ``DataParallel``, ``DistributedSampler``.
    """
    # BEGIN SOLUTION
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            _in_place(lambda t: dist.broadcast(t, src=src), tensor)
    # END SOLUTION


def average_gradients(model: nn.Module) -> None:
    """All-reduce every existing ``.grad`` of ``model`` and divide by the world size.

    对 ``model`` 中每个已有的梯度做 all_reduce 求和并除以进程数，使每个进程都得到平均梯度。

    For every parameter of ``model.parameters()`` (a fixed order, the same on every rank)
    whose ``.grad`` is not ``None``: ``dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)``, then
    ``p.grad /= dist.get_world_size()``, in place; a ``.grad`` that is not contiguous goes
    through a contiguous copy that is then copied back into it (as in
    ``broadcast_parameters``). Afterwards every rank holds the mean of the
    ranks' gradients, which for a mean-reduced loss on equal shards is exactly the gradient of
    the loss on the whole batch. Parameters without a gradient (frozen ones,
    ``requires_grad=False``, or ones not used in the forward pass) are skipped and keep
    ``grad is None``: every rank must have gradients for the same parameters, or the
    collectives do not match (the problem the library wrapper of ``wrap_ddp`` solves with
    ``find_unused_parameters``). Returns ``None``.

    Example::

        >>> # 2 ranks; after backward, rank 0 has w.grad == [1., 2.] and rank 1 [3., 6.]
        >>> average_gradients(model)  # doctest: +SKIP
        >>> model.w.grad  # on both ranks  # doctest: +SKIP
        tensor([2., 4.])

    Forbidden: ``DistributedDataParallel``, ``DataParallel``, ``DistributedSampler``.
    """
    # BEGIN SOLUTION
    world_size = dist.get_world_size()
    with torch.no_grad():
        for param in model.parameters():
            if param.grad is None:
                continue
            _in_place(lambda t: dist.all_reduce(t, op=dist.ReduceOp.SUM), param.grad)
            param.grad.div_(world_size)
    # END SOLUTION


def ddp_train_step(
    model: nn.Module,
    batch: Any,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
) -> float:
    """One data-parallel step on this rank's shard of ``batch``; return the global mean loss.

    数据并行的一步训练：只在本进程那一段数据上前向/反向，平均梯度后更新参数，返回全局平均损失。

    ``batch = (inputs, targets)`` is the same *global* batch on every rank. In order:
    ``model.train()``; take the shard ``shard(batch, dist.get_rank(), dist.get_world_size())``;
    ``optimizer.zero_grad()``; forward the local inputs; ``loss = loss_fn(outputs, targets)``;
    ``loss.backward()``; ``average_gradients(model)``; ``optimizer.step()``. The returned
    value is the mean over ranks of the local losses (``all_reduce`` SUM of a detached copy of
    the loss, divided by the world size), as a Python float: for a mean-reduced loss on equal
    shards it is the loss of the whole batch, identical on every rank. After the step every
    rank's parameters equal those of one process running ``train_step`` on the whole batch
    (up to float rounding), provided the replicas started equal (``broadcast_parameters``)
    and the model has no layer that mixes samples of a batch (BatchNorm's statistics would be
    per shard). Raises ``ValueError`` (from ``shard``) when the batch does not split evenly.

    Example::

        >>> # every rank of a 2-process group, same global batch of 8 samples
        >>> loss = ddp_train_step(model, (x, y), nn.MSELoss(), opt)  # doctest: +SKIP
        >>> loss == train_step(single_model, (x, y), nn.MSELoss(), single_opt)  # doctest: +SKIP
        True

    Forbidden: ``DistributedDataParallel``, ``DataParallel``, ``DistributedSampler``.
    """
    # BEGIN SOLUTION
    world_size = dist.get_world_size()
    inputs, targets = shard(batch, dist.get_rank(), world_size)
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    average_gradients(model)
    optimizer.step()
    total = loss.detach().clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total.item() / world_size
    # END SOLUTION


def wrap_ddp(
    model: nn.Module, device: Optional[Union[str, torch.device, int]] = None
) -> nn.Module:
    """``model`` wrapped in ``torch.nn.parallel.DistributedDataParallel`` (``device_ids`` on CUDA).

    用 PyTorch 自带的 ``DistributedDataParallel`` 包装模型（CUDA 上指定 ``device_ids``），与手写版本对照。

    The library version of the four functions above: building it broadcasts rank 0's
    parameters and buffers (``broadcast_parameters``), and every ``backward()`` through the
    wrapper all-reduces and averages the gradients in buckets, overlapped with the backward
    pass (``average_gradients``). Each rank still feeds it its own shard. When ``device`` is
    given the model is first moved there (``model.to(device)``); a CUDA device (an int is a
    CUDA index, ``"cuda"`` without an index is the current CUDA device) is passed as
    ``device_ids=[device]``, one device per process. On the CPU, or with ``device=None``,
    ``device_ids`` is left out (``None``), which is what DDP requires for CPU modules. The
    process group must be initialised (gloo on CPU, NCCL or gloo on CUDA). The original module
    is ``wrapped.module``.

    Example::

        >>> ddp = wrap_ddp(nn.Linear(4, 2))  # doctest: +SKIP
        >>> type(ddp).__name__, type(ddp.module).__name__  # doctest: +SKIP
        ('DistributedDataParallel', 'Linear')

    Forbidden: nothing.
    """
    # BEGIN SOLUTION
    if device is None:
        return torch.nn.parallel.DistributedDataParallel(model)
    if isinstance(device, int):
        device = torch.device("cuda", device)
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    model = model.to(device)
    if device.type == "cuda":
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[device])
    return torch.nn.parallel.DistributedDataParallel(model)
    # END SOLUTION
