"""Autograd mechanics: vector-Jacobian products, Jacobians, second derivatives, accumulation, SGD.

(自动求导机制：向量-雅可比积、雅可比矩阵、二阶导数、梯度累加与手写 SGD 更新。)

Where a function below lists forbidden calls, it may not use numpy or another array library either,
not even on copies of its values (`x.tolist()`): what they compute cannot be watched.
(列出禁用调用的函数也不得使用 numpy 或其他数组库，即使作用于数值的副本：它们的计算无法被监视。)
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch


def vjp(
    f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """Vector-Jacobian product ``J^T v`` of ``y = f(x)`` at ``x``, by ``y.backward(gradient=v)``.

    用 ``y.backward(gradient=v)`` 求向量-雅可比积 ``Jᵀv``，且不改动调用者的 ``x``。

    ``f`` maps a tensor to a tensor. ``v`` has the shape of ``y = f(x)``; the result has the
    shape, dtype and device of ``x`` and equals ``sum_i v[i] * dy[i]/dx`` (the gradient of
    ``(y * v).sum()`` with respect to ``x``). When ``y`` is a scalar, ``v`` is a scalar
    (``torch.tensor(1.)`` gives the plain gradient).

    Work on a detached copy of ``x`` that requires grad, never on ``x`` itself: afterwards the
    caller's ``x`` has the same values, the same ``requires_grad`` flag and the same ``.grad``
    (``None`` stays ``None``; an existing ``.grad`` is not touched). This also works when ``x``
    is a non-leaf tensor of some other graph. The result carries no autograd history: it has no
    ``grad_fn`` and does not require grad.
    If ``y`` does not depend on ``x`` at all, the product is zero. A ``v`` whose shape does not
    match ``y`` raises ``RuntimeError``, exactly as ``y.backward(gradient=v)`` does.

    Example::

        >>> # the notes: l = mean(3 * (x + 2) ** 2), so v = 1/4 everywhere
        >>> x = torch.tensor([[2.0, 4.0], [3.0, 5.0]])
        >>> vjp(lambda t: 3 * (t + 2) ** 2, x, torch.full((2, 2), 0.25))
        tensor([[ 6.0000,  9.0000],
                [ 7.5000, 10.5000]])
        >>> # the notes: y0 = (w + 2)(w + 1), y1 = (w + 2) + (w + 1), grad_tensors [1, 2] -> 9
        >>> f = lambda w: torch.cat([(w + 2) * (w + 1), (w + 2) + (w + 1)])
        >>> vjp(f, torch.tensor([1.0]), torch.tensor([1.0, 2.0]))
        tensor([9.])
        >>> x.requires_grad, x.grad
        (False, None)

    Forbidden: ``torch.autograd.functional.*``, ``torch.func.*``.
    """
    # BEGIN SOLUTION
    x_ = x.detach().clone().requires_grad_(True)
    y = f(x_)
    if not (isinstance(y, torch.Tensor) and y.requires_grad):
        return torch.zeros_like(x_, requires_grad=False)
    y.backward(gradient=v)
    if x_.grad is None:
        return torch.zeros_like(x_, requires_grad=False)
    return x_.grad
    # END SOLUTION


def jacobian(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The full Jacobian of ``y = f(x)``, shape ``y.shape + x.shape``, one backward per output element.

    逐个输出元素做一次反向传播（``retain_graph=True``，每次之间清空梯度），拼出完整雅可比矩阵。

    ``J[i..., j...] = d y[i...] / d x[j...]``: the leading dimensions index the output, the
    trailing ones the input (the layout of ``torch.autograd.functional.jacobian``). A 0-d ``x``
    or ``y`` contributes no dimensions; a scalar function of a scalar gives a 0-d tensor.
    The result has ``x``'s dtype and device and carries no autograd history (no ``grad_fn``, and it
    does not require grad).

    Build the graph once on a detached copy of ``x`` that requires grad; for each output element
    run a backward pass with ``retain_graph=True`` and read the row from the copy's ``.grad``,
    clearing that gradient before the next pass (gradients accumulate otherwise, so row ``k``
    would hold the sum of rows ``0..k``). The caller's ``x`` is left unchanged (values,
    ``requires_grad``, ``.grad``). Outputs that do not depend on ``x`` give zero rows.

    Example::

        >>> # the notes: y = 3/4 (x + 2)^2, so dy_i/dx_i = 3/2 (x_i + 2) on the diagonal
        >>> jacobian(lambda t: 0.75 * (t + 2) ** 2, torch.tensor([0.0, 1.0]))
        tensor([[3.0000, 0.0000],
                [0.0000, 4.5000]])
        >>> jacobian(lambda t: t.sum(dim=1), torch.ones(2, 3)).shape
        torch.Size([2, 2, 3])

    Forbidden: ``torch.autograd.functional.*``, ``torch.func.*``.
    """
    # BEGIN SOLUTION
    x_ = x.detach().clone().requires_grad_(True)
    y = f(x_)
    out_shape = tuple(y.shape) + tuple(x.shape)
    if not y.requires_grad or y.numel() == 0 or x.numel() == 0:
        return torch.zeros(out_shape, dtype=x.dtype, device=x.device)
    flat_y = y.reshape(-1)
    rows = []
    for i in range(flat_y.numel()):
        x_.grad = None
        flat_y[i].backward(retain_graph=True)
        if x_.grad is None:
            rows.append(torch.zeros_like(x_, requires_grad=False).reshape(-1))
        else:
            rows.append(x_.grad.reshape(-1))
    x_.grad = None
    return torch.stack(rows).reshape(out_shape)
    # END SOLUTION


def second_derivative(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Elementwise ``f''(x)`` of an elementwise ``f``, via ``torch.autograd.grad(..., create_graph=True)``.

    对逐元素函数 ``f``，用 ``create_graph=True`` 的 ``torch.autograd.grad`` 求两次导，得到 ``f''(x)``。

    ``f`` acts elementwise (``f(x)[i]`` depends on ``x[i]`` only), so ``f'(x)`` is the gradient
    of ``f(x).sum()`` and ``f''(x)`` the gradient of ``f'(x).sum()``. The first call to
    ``torch.autograd.grad`` must use ``create_graph=True`` so that the first derivative is itself
    differentiable. The result has ``x``'s shape, dtype and device, carries no autograd history (no
    ``grad_fn``, and it does not require grad),
    and is zero wherever ``f`` is linear (also when ``f'`` does not depend on ``x`` at all, e.g.
    ``f(t) = 3 * t`` or a constant ``f``). The caller's ``x`` is left unchanged.

    Example::

        >>> # the notes: y = x ** 2 at x = 3: dy/dx = 6, d2y/dx2 = 2
        >>> second_derivative(lambda t: t ** 2, torch.tensor([3.0]))
        tensor([2.])
        >>> second_derivative(lambda t: t ** 3, torch.tensor([1.0, 2.0]))  # 6x
        tensor([ 6., 12.])

    Forbidden: ``torch.autograd.functional.*``, ``torch.func.*``.
    """
    # BEGIN SOLUTION
    x_ = x.detach().clone().requires_grad_(True)
    y = f(x_)
    if not y.requires_grad:
        return torch.zeros_like(x_, requires_grad=False)
    (first,) = torch.autograd.grad(y.sum(), x_, create_graph=True, allow_unused=True)
    if first is None or not first.requires_grad:
        return torch.zeros_like(x_, requires_grad=False)
    (second,) = torch.autograd.grad(first.sum(), x_, allow_unused=True)
    if second is None:
        return torch.zeros_like(x_, requires_grad=False)
    return second
    # END SOLUTION


def accumulated_grad(w: torch.Tensor, x: torch.Tensor, steps: int) -> torch.Tensor:
    """Run ``y = (x + w) * (w + 1); y.backward()`` ``steps`` times, never zeroing; return ``w.grad``.

    不清零地重复 ``steps`` 次前向与 ``y.backward()``，返回累加后的 ``w.grad`` 的副本（笔记中的 5, 10, 15, 20）。

    ``w`` and ``x`` are float tensors of shape ``(1,)``. Each pass builds a fresh graph
    ``a = x + w``, ``b = w + 1``, ``y = a * b`` and calls ``y.backward()``; gradients add up in
    ``w.grad`` because nothing clears them, so the result is ``steps * (2 * w + x + 1)``.
    Work on copies (``w.detach().clone().requires_grad_(True)`` and the same for ``x``), so the
    caller's tensors keep their values, flags and ``.grad``. The result is a new tensor with
    ``w``'s shape, dtype and device, sharing no storage with any ``.grad``, with no history.
    ``steps == 0`` gives zeros (nothing was accumulated); a negative ``steps`` raises
    ``ValueError``.

    Example::

        >>> w, x = torch.tensor([1.0]), torch.tensor([2.0])
        >>> [accumulated_grad(w, x, k) for k in range(1, 5)]
        [tensor([5.]), tensor([10.]), tensor([15.]), tensor([20.])]

    Forbidden: nothing.
    """
    # BEGIN SOLUTION
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    w_ = w.detach().clone().requires_grad_(True)
    x_ = x.detach().clone().requires_grad_(True)
    for _ in range(steps):
        a = torch.add(w_, x_)
        b = torch.add(w_, 1)
        y = torch.mul(a, b)
        y.backward()
    if w_.grad is None:
        return torch.zeros_like(w_, requires_grad=False)
    return w_.grad.detach().clone()
    # END SOLUTION


def sgd_step_(params: Iterable[torch.Tensor], lr: float) -> None:
    """In-place SGD step ``p -= lr * p.grad`` for every parameter with a gradient, then clear grads.

    对每个有梯度的参数原地执行 ``p -= lr * p.grad``（不记录计算图），然后清空梯度。

    ``params`` is any iterable of leaf tensors with ``requires_grad=True``: a list, or the
    generator returned by ``model.parameters()`` (which can be iterated only once, so update and
    clear each parameter in the same pass). Parameters whose ``.grad`` is ``None`` are skipped.
    The update runs under ``torch.no_grad()`` and is in place, so each ``p`` stays the same leaf
    tensor: same object, same storage (``data_ptr``), ``requires_grad=True``, ``grad_fn is None``.
    Afterwards every gradient is cleared (set to ``None``, like ``optimizer.zero_grad()``; zeros
    would do too). A parameter listed twice is updated once. Returns ``None``.
    (``p = p - lr * p.grad`` only rebinds a name; doing the in-place update outside ``no_grad``
    raises ``RuntimeError`` for a leaf that requires grad.)

    Example::

        >>> w = torch.tensor([1.0], requires_grad=True)
        >>> y = (w + 2) * (w + 1)      # dy/dw = 2w + 3 = 5
        >>> y.backward()
        >>> sgd_step_([w], lr=0.1)
        >>> w, w.grad
        (tensor([0.5000], requires_grad=True), None)

    Forbidden: ``torch.optim.*``.
    """
    # BEGIN SOLUTION
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            p.sub_(lr * p.grad)
            p.grad = None
    # END SOLUTION
