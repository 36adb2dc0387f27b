"""Custom ``torch.autograd.Function``s: forward and backward written by hand.

(自定义 ``torch.autograd.Function``：亲手写前向与反向传播。)

Where a function below lists forbidden calls, it may not use numpy or another array library either,
not even on copies of its values (`x.tolist()`): what they compute cannot be watched.
(列出禁用调用的函数也不得使用 numpy 或其他数组库，即使作用于数值的副本：它们的计算无法被监视。)
"""

from __future__ import annotations

from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch.autograd import Function


class Exp(Function):
    """``exp(x)`` as a custom autograd Function that saves its result for the backward pass.

    自定义指数函数：前向保存结果 ``exp(x)``，反向用 ``grad_output * result``。

    Used as ``Exp.apply(x)``. The output's ``grad_fn`` is this class's backward node
    (``ExpBackward``), so the gradient comes from ``Exp.backward``.

    Example::

        >>> x = torch.tensor([1.0], requires_grad=True)
        >>> y = Exp.apply(x)
        >>> y
        tensor([2.7183], grad_fn=<ExpBackward>)
        >>> y.backward()
        >>> x.grad
        tensor([2.7183])

    Forbidden: autograd inside ``backward`` (``Tensor.backward``, ``torch.autograd.grad``).
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        """Return ``exp(x)`` and save that **result** (not ``x``) with ``ctx.save_for_backward``.

        计算 ``exp(x)``，并用 ``ctx.save_for_backward`` 保存结果本身。

        Same values, shape and dtype as ``torch.exp(x)``. The saved tensor is the output, so
        ``y.grad_fn.saved_tensors[0]`` equals ``y``.

        Example::

            >>> Exp.apply(torch.tensor([0.0, 1.0]))
            tensor([1.0000, 2.7183])

        Forbidden: nothing.
        """
        raise NotImplementedError("Exp.forward: not implemented yet")

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        """Return ``grad_output * result``, using the result saved in ``forward``.

        取出前向保存的结果，返回 ``grad_output * result``（因为 ``d exp(x)/dx = exp(x)``）。

        One gradient, for the one input ``x``.

        Example::

            >>> x = torch.tensor([0.0, 1.0], requires_grad=True)
            >>> Exp.apply(x).sum().backward()
            >>> x.grad
            tensor([1.0000, 2.7183])

        Forbidden: ``Tensor.backward``, ``torch.autograd.grad``.
        """
        raise NotImplementedError("Exp.backward: not implemented yet")


class GradCoeff(Function):
    """Identity in the forward pass; multiplies the gradient by ``coeff`` in the backward pass.

    前向原样返回 ``x``，反向把梯度乘以系数 ``coeff``（如梯度反转层）。

    Used as ``GradCoeff.apply(x, coeff)`` with a Python number ``coeff``. With ``coeff = -1``
    this is the gradient-reversal layer of domain-adversarial training.

    Example::

        >>> # the notes: x = 2, coeff = -0.1, loss = ret ** 2 -> grad = -0.1 * 2 * 2 = -0.4
        >>> x = torch.tensor([2.0], requires_grad=True)
        >>> ret = GradCoeff.apply(x, -0.1) ** 2
        >>> ret
        tensor([4.], grad_fn=<PowBackward0>)
        >>> ret.backward()
        >>> x.grad
        tensor([-0.4000])

    Forbidden: autograd inside ``backward`` (``Tensor.backward``, ``torch.autograd.grad``).
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, coeff: float) -> torch.Tensor:
        """Store ``coeff`` on ``ctx`` and return ``x`` unchanged, as a view (``x.view_as(x)``).

        把 ``coeff`` 存到 ``ctx`` 上，返回 ``x`` 的视图（数值不变、共享存储）。

        The output has ``x``'s values, shape and dtype and shares its storage (it is a view of
        ``x``, not a copy). ``coeff`` is not a tensor, so keep it as an attribute of ``ctx``
        (``save_for_backward`` is for tensors). Note that ``x.view_as(x)`` must be *returned*;
        the notes compute it and throw it away.

        Example::

            >>> x = torch.tensor([2.0, 3.0])
            >>> GradCoeff.apply(x, 0.5)
            tensor([2., 3.])

        Forbidden: nothing.
        """
        raise NotImplementedError("GradCoeff.forward: not implemented yet")

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Return ``(coeff * grad_output, None)``: one gradient per forward input.

        返回 ``(coeff * grad_output, None)``：``backward`` 的返回个数与 ``forward`` 的输入个数相同。

        ``coeff`` is a number and needs no gradient, hence ``None`` in its position; returning
        one value only makes autograd raise "returned an incorrect number of gradients".

        Example::

            >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
            >>> GradCoeff.apply(x, -1.0).sum().backward()
            >>> x.grad
            tensor([-1., -1.])

        Forbidden: ``Tensor.backward``, ``torch.autograd.grad``.
        """
        raise NotImplementedError("GradCoeff.backward: not implemented yet")


class LegendreP3(Function):
    """The Legendre polynomial ``P3(x) = 0.5 * (5x^3 - 3x)`` with a hand-written derivative.

    三阶勒让德多项式 ``P3(x) = ½(5x³ − 3x)``，导数 ``1.5(5x² − 1)`` 手写在 ``backward`` 里。

    Used as ``LegendreP3.apply(x)``; see ``legendre_model`` for the notes' model.

    Example::

        >>> x = torch.tensor([0.5, 2.0], requires_grad=True)
        >>> LegendreP3.apply(x)
        tensor([-0.4375, 17.0000], grad_fn=<LegendreP3Backward>)

    Forbidden: autograd inside ``backward`` (``Tensor.backward``, ``torch.autograd.grad``).
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        """Return ``0.5 * (5 * x**3 - 3 * x)`` and save the input ``x`` for the backward pass.

        计算 ``0.5 * (5x³ − 3x)``，并保存输入 ``x`` 供反向使用。

        Elementwise, same shape and dtype as ``x``.

        Example::

            >>> LegendreP3.apply(torch.tensor([1.0, 3.0]))
            tensor([ 1., 63.])

        Forbidden: nothing.
        """
        raise NotImplementedError("LegendreP3.forward: not implemented yet")

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        """Return ``grad_output * 1.5 * (5 * x**2 - 1)`` with the ``x`` saved in ``forward``.

        返回 ``grad_output * 1.5 * (5x² − 1)``。

        Example::

            >>> x = torch.tensor([1.0, 3.0], requires_grad=True)
            >>> LegendreP3.apply(x).sum().backward()
            >>> x.grad
            tensor([ 6., 66.])

        Forbidden: ``Tensor.backward``, ``torch.autograd.grad``.
        """
        raise NotImplementedError("LegendreP3.backward: not implemented yet")


def legendre_model(
    a: Union[torch.Tensor, float],
    b: Union[torch.Tensor, float],
    c: Union[torch.Tensor, float],
    d: Union[torch.Tensor, float],
    x: Union[torch.Tensor, float],
) -> torch.Tensor:
    """The notes' cubic model ``a + b * P3(c + d * x)``, ``P3`` applied by ``LegendreP3.apply``.

    笔记中的三次模型：``y = a + b · P3(c + d·x)``，其中 ``P3`` 用 ``LegendreP3.apply`` 计算。

    ``a, b, c, d`` are tensors (usually 0-d parameters with ``requires_grad=True``) or
    numbers, ``x`` a tensor; the usual broadcasting applies. The gradient with respect to ``c``,
    ``d`` (and ``x``) flows through ``LegendreP3.backward``; ``a`` and ``b`` get theirs from
    ordinary autograd. Returns the tensor ``a + b * LegendreP3.apply(c + d * x)``.

    Example::

        >>> # the notes: a, b, c, d = 1, 2, 1, 2 and x = 1 -> 1 + 2 * P3(3) = 127
        >>> a, b, c, d = (torch.tensor(v, requires_grad=True) for v in (1.0, 2.0, 1.0, 2.0))
        >>> y = legendre_model(a, b, c, d, torch.tensor(1.0))
        >>> y
        tensor(127., grad_fn=<AddBackward0>)
        >>> y.backward()
        >>> c.grad, d.grad   # b * 1.5 * (5 * 3**2 - 1) * (1, x)
        (tensor(132.), tensor(132.))

    Forbidden: nothing.
    """
    raise NotImplementedError("legendre_model: not implemented yet")


class Conv2dFn(Function):
    """2-D convolution (stride 1, no padding, no bias) with a hand-written backward pass.

    二维卷积（步长 1、无填充、无偏置）：前向用 ``F.conv2d``，反向用 ``F.conv_transpose2d`` 与 ``F.conv2d``。

    Used as ``Conv2dFn.apply(X, weight)`` with ``X`` of shape ``(N, C_in, H, W)`` (or unbatched
    ``(C_in, H, W)``) and ``weight`` of shape ``(C_out, C_in, kh, kw)``.

    Example::

        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at 0x...>
        >>> weight = torch.rand(5, 3, 3, 3, requires_grad=True, dtype=torch.double)
        >>> X = torch.rand(10, 3, 7, 7, requires_grad=True, dtype=torch.double)
        >>> torch.autograd.gradcheck(Conv2dFn.apply, (X, weight))
        True
        >>> Conv2dFn.apply(X, weight).shape
        torch.Size([10, 5, 5, 5])

    Forbidden: autograd inside ``backward`` (``Tensor.backward``, ``torch.autograd.grad``).
    """

    @staticmethod
    def forward(ctx: Any, X: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """Return ``F.conv2d(X, weight)`` and save ``X`` and ``weight`` for the backward pass.

        返回 ``F.conv2d(X, weight)``，并保存 ``X`` 与 ``weight``。

        The output has shape ``(N, C_out, H - kh + 1, W - kw + 1)``. Calling ``F.conv2d`` is
        allowed here; only the backward pass is yours.

        Example::

            >>> Conv2dFn.apply(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2))
            tensor([[[[4., 4.],
                      [4., 4.]]]])

        Forbidden: nothing.
        """
        raise NotImplementedError("Conv2dFn.forward: not implemented yet")

    @staticmethod
    def backward(
        ctx: Any, grad_out: torch.Tensor
    ) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
        """Return ``(grad_X, grad_weight)``, by ``F.conv_transpose2d`` and ``F.conv2d`` respectively.

        ``grad_X`` 用转置卷积求得；``grad_weight`` 把批维当作通道维，用 ``F.conv2d`` 求得。

        * ``grad_X = F.conv_transpose2d(grad_out, weight)``, shape ``(N, C_in, H, W)``: every
          output gradient is scattered back through the kernel.
        * ``grad_weight[o, i] = sum_n corr2d(X[n, i], grad_out[n, o])``: a convolution in which
          the batch plays the channel role, i.e.
          ``F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)``,
          shape ``(C_out, C_in, kh, kw)``. Forgetting a transpose goes unnoticed with
          ``N = C_in = C_out = 1`` but is wrong (or the wrong shape) otherwise.

        A gradient is computed only where ``ctx.needs_input_grad`` asks for it (``None``
        elsewhere). Passes ``torch.autograd.gradcheck`` in float64.

        Example::

            >>> X = torch.ones(1, 1, 3, 3, requires_grad=True)
            >>> w = torch.ones(1, 1, 2, 2, requires_grad=True)
            >>> Conv2dFn.apply(X, w).sum().backward()
            >>> X.grad[0, 0]
            tensor([[1., 2., 1.],
                    [2., 4., 2.],
                    [1., 2., 1.]])
            >>> w.grad[0, 0]
            tensor([[4., 4.],
                    [4., 4.]])

        Forbidden: ``Tensor.backward``, ``torch.autograd.grad``.
        """
        raise NotImplementedError("Conv2dFn.backward: not implemented yet")


class LinearFn(Function):
    """The affine map ``x @ weight.T + bias`` of ``nn.Linear``, with a hand-written backward.

    全连接层 ``x @ weight.T + bias`` 的自定义 Function，按 ``ctx.needs_input_grad`` 只算需要的梯度。

    Used as ``LinearFn.apply(x, weight)`` or ``LinearFn.apply(x, weight, bias)``, with ``x`` of
    shape ``(..., in_features)`` (any number of leading batch dimensions, including none),
    ``weight`` ``(out_features, in_features)`` and ``bias`` ``(out_features,)`` or ``None``.
    Same values as ``F.linear(x, weight, bias)``. A ``bias`` of another dtype than ``x`` is not graded
    (``F.linear`` refuses it).

    Example::

        >>> x = torch.tensor([[1.0, 2.0]], requires_grad=True)
        >>> w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], requires_grad=True)
        >>> b = torch.tensor([0.0, 0.0, 1.0], requires_grad=True)
        >>> y = LinearFn.apply(x, w, b)
        >>> y
        tensor([[1., 2., 4.]], grad_fn=<LinearFnBackward>)
        >>> y.sum().backward()
        >>> x.grad, b.grad
        (tensor([[2., 2.]]), tensor([1., 1., 1.]))

    Forbidden: autograd inside ``backward`` (``Tensor.backward``, ``torch.autograd.grad``).
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """Return ``x @ weight.T`` plus ``bias`` when given; save what the backward pass needs.

        返回 ``x @ weight.T (+ bias)``，保存 ``x`` 与 ``weight``，并记下是否有偏置。

        ``bias`` may be left out or passed as ``None``. Output shape ``(..., out_features)``.

        Example::

            >>> LinearFn.apply(torch.ones(2, 3), torch.ones(4, 3)).shape
            torch.Size([2, 4])

        Forbidden: nothing.
        """
        raise NotImplementedError("LinearFn.forward: not implemented yet")

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Optional[torch.Tensor], ...]:
        """Return ``(grad_x, grad_weight, grad_bias)``, ``None`` where ``ctx.needs_input_grad`` is false.

        返回三个梯度：``grad_output @ weight``、``grad_outputᵀ @ x``（对所有批维求和）与 ``grad_output`` 按批维求和。

        * ``grad_x = grad_output @ weight``, shape of ``x``;
        * ``grad_weight = grad_output^T @ x`` summed over every leading dimension,
          shape ``(out_features, in_features)``;
        * ``grad_bias = grad_output`` summed over every leading dimension, shape of ``bias``;
          ``None`` when ``bias`` is ``None`` (autograd raises if a tensor is returned for an
          input that was not a tensor).

        Return exactly one value per argument given to ``apply``: three when ``bias`` was passed
        (even as ``None``), two when it was left out (``len(ctx.needs_input_grad)`` tells).

        Example::

            >>> x = torch.ones(4, 3)
            >>> w = torch.ones(2, 3, requires_grad=True)
            >>> LinearFn.apply(x, w).sum().backward()
            >>> w.grad
            tensor([[4., 4., 4.],
                    [4., 4., 4.]])

        Forbidden: ``Tensor.backward``, ``torch.autograd.grad``.
        """
        raise NotImplementedError("LinearFn.backward: not implemented yet")
