"""The training workflow: seeding, one optimisation step, evaluation and a full training loop.

(训练流程：设置随机种子、单步训练、模型评估，以及完整的训练循环。)

Where a function below lists forbidden calls, it may not use numpy or another array library either,
not even on copies of its values (`x.tolist()`): what they compute cannot be watched.
(列出禁用调用的函数也不得使用 numpy 或其他数组库，即使作用于数值的副本：它们的计算无法被监视。)
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterable

import torch
from torch import nn


def set_seed(seed: int) -> None:
    """Seed Python's ``random``, NumPy (when installed) and torch on every device.

    为 Python 的 random、NumPy（若已安装）以及 torch 的所有设备设置同一个随机种子，保证实验可复现。

    After ``set_seed(s)``, two runs draw the same numbers from ``random``, from
    ``numpy.random`` (the legacy global generator, seeded with ``seed % 2**32`` because NumPy
    only takes 32-bit seeds) and from torch. ``torch.manual_seed`` seeds the CPU generator
    and every CUDA device's generator; ``torch.cuda.manual_seed_all`` is also called when
    CUDA is available (the notes: CPU and CUDA have separate generators). NumPy is imported
    inside the function, so a machine without NumPy still works. It does not switch cuDNN to
    deterministic algorithms: that is a separate choice with a speed cost.

    Example::

        >>> set_seed(42)
        >>> a = torch.rand(3); r = random.random()
        >>> set_seed(42)
        >>> torch.equal(a, torch.rand(3)), r == random.random()
        (True, True)

    Forbidden: nothing.
    """
    raise NotImplementedError("set_seed: not implemented yet")


def train_step(
    model: nn.Module,
    batch: Any,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
) -> float:
    """One optimisation step on ``batch = (inputs, targets)``; return the loss as a Python float.

    在一个批次 ``(inputs, targets)`` 上做一步优化，返回本步损失（Python float）。

    In this order: ``model.train()`` (dropout and batch norm in training mode),
    ``optimizer.zero_grad()`` (gradients accumulate otherwise, as the notes stress),
    ``outputs = model(inputs)``, ``loss = loss_fn(outputs, targets)``, ``loss.backward()``,
    ``optimizer.step()``. The returned value is ``loss.item()``: the loss *before* the update,
    detached from the graph (returning the tensor would keep the graph alive). ``batch`` may
    be a tuple or the two-element list a ``DataLoader`` yields; nothing is moved between
    devices.

    Example::

        >>> _ = torch.manual_seed(0)
        >>> model = nn.Linear(2, 1)
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> x, y = torch.randn(8, 2), torch.randn(8, 1)
        >>> first = train_step(model, (x, y), nn.MSELoss(), opt)
        >>> isinstance(first, float), train_step(model, (x, y), nn.MSELoss(), opt) < first
        (True, True)

    Forbidden: nothing.
    """
    raise NotImplementedError("train_step: not implemented yet")


def evaluate(model: nn.Module, loader: Iterable[Any]) -> float:
    """Classification accuracy of ``model`` over ``loader``, in ``[0, 1]``, as a Python float.

    在 ``loader`` 上计算模型的分类准确率（0 到 1 之间的 Python float），使用评估模式且不构建计算图。

    Calls ``model.eval()`` and runs every batch ``(inputs, targets)`` inside
    ``torch.no_grad()`` (no graph is built: it saves memory and time, as the notes say). The
    prediction is ``outputs.argmax(dim=1)`` (the class dimension, as for
    ``nn.CrossEntropyLoss``); accuracy is the number of correct predictions divided by the
    number of samples over the whole loader (not the mean of per-batch accuracies, which
    would overweight a smaller last batch). The model is left in evaluation mode. An empty
    loader raises ``ValueError`` (accuracy is undefined).

    Example::

        >>> model = nn.Linear(2, 2, bias=False)
        >>> with torch.no_grad():
        ...     _ = model.weight.copy_(torch.eye(2))
        >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0], [0.0, 3.0]])
        >>> y = torch.tensor([0, 1, 1, 1])
        >>> evaluate(model, [(x[:3], y[:3]), (x[3:], y[3:])])
        0.75

    Forbidden: nothing.
    """
    raise NotImplementedError("evaluate: not implemented yet")


def fit(
    model: nn.Module,
    train_loader: Iterable[Any],
    val_loader: Iterable[Any],
    epochs: int,
    lr: float,
) -> list[dict[str, Any]]:
    """Train with SGD and cross-entropy for ``epochs`` epochs; return one dict per epoch.

    用 SGD 和交叉熵损失训练 ``epochs`` 轮，每轮结束后在验证集上评估，返回每轮的记录列表。

    One ``torch.optim.SGD(model.parameters(), lr=lr)`` (plain: no momentum, no weight decay)
    and one ``nn.CrossEntropyLoss()`` (mean over the batch) are made before the first epoch.
    Each epoch runs ``train_step`` on every batch of ``train_loader`` in order, then
    ``evaluate(model, val_loader)``, and appends::

        {"epoch": e, "train_loss": mean_loss, "val_accuracy": accuracy}

    where ``e`` is **1-based** (the first epoch is ``1``, the last is ``epochs``),
    ``train_loss`` is the mean of that epoch's per-batch losses (a Python float; each batch
    loss is already a mean over its samples) and ``val_accuracy`` is the float that
    ``evaluate`` returns. ``epochs=0`` returns ``[]``; a negative ``epochs`` or a
    ``train_loader`` that yields no batch raises ``ValueError``.

    Example::

        >>> _ = torch.manual_seed(0)
        >>> x = torch.randn(32, 2); y = (x[:, 0] > 0).long()
        >>> batches = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8)]
        >>> history = fit(nn.Linear(2, 2), batches, batches, epochs=3, lr=0.5)
        >>> [h["epoch"] for h in history], sorted(history[0])
        ([1, 2, 3], ['epoch', 'train_loss', 'val_accuracy'])
        >>> history[-1]["train_loss"] < history[0]["train_loss"]
        True

    Forbidden: nothing.
    """
    raise NotImplementedError("fit: not implemented yet")
