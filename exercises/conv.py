"""Convolution and pooling by hand: cross-correlation, padding, output sizes, pooling and a Conv2D layer.

(手写卷积与池化：互相关、填充、输出尺寸公式、最大/平均池化，以及一个可学习的 Conv2D 层。)

Where a function below lists forbidden calls, it may not use numpy or another array library either,
not even on copies of its values (`x.tolist()`): what they compute cannot be watched.
(列出禁用调用的函数也不得使用 numpy 或其他数组库，即使作用于数值的副本：它们的计算无法被监视。)
"""

import operator

import torch
from torch import nn


def corr2d(X, K):
    """Return the 2-D cross-correlation of ``X`` (H, W) with the kernel ``K`` (h, w), "valid" size.

    二维互相关（深度学习里的“卷积”）：输出形状为 (H-h+1, W-w+1)。

    ``Y[i, j] = (X[i:i+h, j:j+w] * K).sum()``, the same numbers as
    ``F.conv2d(X[None, None], K[None, None])[0, 0]``. Loop over the ``h * w`` kernel positions,
    not over the output pixels: ``Y = sum over (a, b) of K[a, b] * X[a:a+H-h+1, b:b+W-w+1]``.
    The result has the promoted dtype of ``X`` and ``K`` (no ``.float()``) and their device
    (no ``torch.zeros`` on the CPU), and it is differentiable with respect to both.

    Raises ``RuntimeError`` (as ``F.conv2d`` does) when ``X`` or ``K`` is not 2-D, when the kernel
    has a size below 1, or when it is larger than ``X``.

    Example::

        >>> X = torch.tensor([[0., 1., 2.], [3., 4., 5.], [6., 7., 8.]])
        >>> K = torch.tensor([[0., 1.], [2., 3.]])
        >>> corr2d(X, K)
        tensor([[19., 25.],
                [37., 43.]])

    Forbidden: convolution of any kind (F.conv*, torch.conv*, nn.Conv*, convolution), unfold, fold.
    """
    raise NotImplementedError("corr2d: not implemented yet")


def corr2d_multi_in(X, K):
    """Cross-correlate a multi-channel ``X`` (C, H, W) with ``K`` (C, h, w) and sum over channels.

    多输入通道互相关：每个通道分别做 corr2d，再把结果相加，输出 (H-h+1, W-w+1)。

    ``Y = sum over c of corr2d(X[c], K[c])``, the same numbers as
    ``F.conv2d(X[None], K[None])[0, 0]``. Vectorise over the channels: for each kernel position
    ``(a, b)`` the channel sum of ``K[:, a, b]`` times the shifted slices ``X[:, a:a+H', b:b+W']`` is
    one ``tensordot``. Dtype (promoted), device and gradients as in :func:`corr2d`.

    Raises ``RuntimeError`` when ``X`` or ``K`` is not 3-D, when their channel counts differ, and
    for a kernel that is empty or larger than ``X``.

    Example::

        >>> X = torch.tensor([[[0., 1., 2.], [3., 4., 5.], [6., 7., 8.]],
        ...                   [[1., 2., 3.], [4., 5., 6.], [7., 8., 9.]]])
        >>> K = torch.tensor([[[0., 1.], [2., 3.]], [[1., 2.], [3., 4.]]])
        >>> corr2d_multi_in(X, K)
        tensor([[ 56.,  72.],
                [104., 120.]])

    Forbidden: convolution of any kind (F.conv*, torch.conv*, nn.Conv*, convolution), unfold, fold.
    """
    raise NotImplementedError("corr2d_multi_in: not implemented yet")


def corr2d_multi_in_out(X, K):
    """Cross-correlate ``X`` (C, H, W) with ``C_out`` kernels ``K`` (C_out, C, h, w): (C_out, H', W').

    多输入多输出通道互相关：每个输出通道用一组 (C, h, w) 的核做 corr2d_multi_in，结果堆叠。

    ``Y[o] = corr2d_multi_in(X, K[o])``, the same numbers as ``F.conv2d(X[None], K)[0]`` (no
    bias, stride 1, no padding). Vectorise over both channel dims: for each kernel position
    ``(a, b)``, ``tensordot(K[:, :, a, b], X[:, a:a+H', b:b+W'], dims=1)`` gives the ``(C_out, H',
    W')`` contribution. Dtype (promoted), device and gradients as in :func:`corr2d`.

    Raises ``RuntimeError`` when ``X`` is not 3-D or ``K`` not 4-D, when ``K.shape[1]`` differs from
    the channels of ``X``, and for a kernel that is empty or larger than ``X``.

    Example::

        >>> X = torch.tensor([[[0., 1., 2.], [3., 4., 5.], [6., 7., 8.]],
        ...                   [[1., 2., 3.], [4., 5., 6.], [7., 8., 9.]]])
        >>> K = torch.tensor([[[0., 1.], [2., 3.]], [[1., 2.], [3., 4.]]])
        >>> K = torch.stack((K, K + 1, K + 2), 0)  # 3 output channels
        >>> corr2d_multi_in_out(X, K)
        tensor([[[ 56.,  72.],
                 [104., 120.]],
        <BLANKLINE>
                [[ 76., 100.],
                 [148., 172.]],
        <BLANKLINE>
                [[ 96., 128.],
                 [192., 224.]]])

    Forbidden: convolution of any kind (F.conv*, torch.conv*, nn.Conv*, convolution), unfold, fold.
    """
    raise NotImplementedError("corr2d_multi_in_out: not implemented yet")


def conv_output_size(n, kernel, padding=0, stride=1):
    """Return the output length of a convolution or pooling along one dim: ``(n - k + 2p) // s + 1``.

    卷积/池化输出尺寸公式：floor((n - kernel + 2*padding) / stride) + 1。

    ``n`` is the input length, ``kernel`` the kernel length, ``padding`` the zeros added on each
    side and ``stride`` the step; all are ints (``bool`` and floats are refused). The division
    floors, so the last positions that do not fill a whole window are dropped, as in
    ``nn.Conv2d`` and ``nn.MaxPool2d`` (``ceil_mode=False``).

    Raises ``ValueError`` for a non-int argument, ``n < 1``, ``kernel < 1``, ``padding < 0``,
    ``stride < 1``, or a result below 1 (the kernel does not fit in the padded input).

    Example::

        >>> conv_output_size(8, 3, padding=1)  # nn.Conv2d(1, 1, kernel_size=3, padding=1) on 8x8
        8
        >>> conv_output_size(8, 5, padding=2), conv_output_size(8, 3, padding=1)  # kernel (5, 3), padding (2, 1)
        (8, 8)
        >>> conv_output_size(8, 3, stride=3), conv_output_size(8, 5, padding=1, stride=4)  # kernel (3, 5), padding (0, 1), stride (3, 4)
        (2, 2)
        >>> conv_output_size(2, 3)
        Traceback (most recent call last):
            ...
        ValueError: kernel 3 does not fit in an input of size 2 with padding 0: output size would be 0

    Forbidden: nothing.
    """
    raise NotImplementedError("conv_output_size: not implemented yet")


def pad2d(X, padding):
    """Zero-pad the last two dims of ``X``: ``ph`` rows above and below, ``pw`` columns left and right.

    在最后两维两侧补零：上下各 ph 行，左右各 pw 列。

    ``padding`` is an int (the same for both dims) or a pair ``(ph, pw)``; a ``(..., H, W)`` input
    gives ``(..., H + 2*ph, W + 2*pw)``, the same as ``F.pad(X, (pw, pw, ph, ph))``. Build it by
    concatenating zero blocks made with ``X.new_zeros`` (same dtype and device as ``X``); the
    result is a new tensor and the gradient flows back to ``X``.

    ``padding`` must be a non-negative int or a pair of them (``F.pad`` would crop where it is
    negative; that is not graded). A padding of another type (a float, a bool, a longer sequence) is
    not graded either. Raises ``ValueError`` when ``X`` has fewer than 2 dims; ``RuntimeError``,
    which ``F.pad`` raises there, counts as well.

    Example::

        >>> pad2d(torch.ones(2, 3), 1)
        tensor([[0., 0., 0., 0., 0.],
                [0., 1., 1., 1., 0.],
                [0., 1., 1., 1., 0.],
                [0., 0., 0., 0., 0.]])
        >>> pad2d(torch.rand(8, 8), (2, 1)).shape
        torch.Size([12, 10])

    Forbidden: F.pad, nn.*Pad*, constant_pad_nd.
    """
    raise NotImplementedError("pad2d: not implemented yet")


def pool2d(X, pool_size, mode="max", stride=1, padding=0):
    """Max or average pooling over the last two dims of ``X``.

    二维池化（最大或平均）：窗口在最后两维上滑动，可设步幅与填充。

    ``pool_size``, ``stride`` and ``padding`` are each an int or a pair (rows, columns); note the
    default ``stride=1`` (``nn.MaxPool2d`` defaults to the pool size). Every window of the padded
    input gives one output value; the output size per dim is ``(n + 2p - k) // s + 1``. For
    ``X`` of shape ``(N, C, H, W)`` this matches ``F.max_pool2d`` / ``F.avg_pool2d`` with the same
    arguments; any number of leading dims is allowed.

    - ``mode="max"``: padding counts as ``-inf`` (it never wins). Among equal maxima the first in
      the window (row by row) is taken and a NaN always wins, so the gradient goes to exactly the
      element ``F.max_pool2d`` picks.
    - ``mode="avg"``: padding counts as zeros and is included in the count (PyTorch's
      ``count_include_pad=True``): every window is divided by ``kh * kw``. Integer inputs divide
      with truncation, as ``F.avg_pool2d`` does for int64.

    Loop over the ``kh * kw`` positions inside the window, each a strided slice of the padded
    input, not over output pixels. Output dtype and device are those of ``X``; differentiable. A complex
    ``X`` is not graded (``F.avg_pool2d`` refuses it).

    Raises ``ValueError`` for a ``mode`` other than ``"max"``/``"avg"``. Raises ``ValueError`` for
    sizes that are not ints or pairs, ``pool_size < 1``, ``stride < 1``, ``padding < 0``, padding
    larger than half the pool size (PyTorch: "pad should be at most half of effective kernel
    size"), ``X`` with fewer than 2 dims, and an output size below 1; for these ``RuntimeError``,
    which ``F.max_pool2d`` / ``F.avg_pool2d`` raise, counts as well, and for a size that is not an
    int ``TypeError``, which they raise there, counts too.

    Example::

        >>> X = torch.tensor([[0., 1., 2.], [4., 5., 6.], [7., 8., 9.]])
        >>> pool2d(X, (2, 2))
        tensor([[5., 6.],
                [8., 9.]])
        >>> pool2d(X, (2, 2), "avg")
        tensor([[2.5000, 3.5000],
                [6.0000, 7.0000]])
        >>> pool2d(X, 3, padding=1, stride=2)
        tensor([[5., 6.],
                [8., 9.]])

    Forbidden: every pooling op (F.*pool*, nn.*Pool*), unfold, fold.
    """
    raise NotImplementedError("pool2d: not implemented yet")


class Conv2D(nn.Module):
    """A 2-D convolution layer made from :func:`corr2d`: one learnable kernel and one bias.

    自定义二维卷积层：参数为卷积核 weight（形状 kernel_size）和偏置 bias（形状 (1,)）。

    ``Conv2D(kernel_size)`` holds two ``nn.Parameter``s, ``weight`` of shape ``kernel_size`` (a pair
    ``(h, w)``; an int ``k`` means ``(k, k)``) and ``bias`` of shape ``(1,)``, both drawn at random.
    ``forward(x)`` for a 2-D ``x`` returns ``corr2d(x, weight) + bias``. Trained by gradient
    descent on ``X`` and ``Y = corr2d(X, [[1., -1.]])`` it learns the edge-detection kernel
    ``[[1, -1]]`` (and a bias near 0).

    Example::

        >>> X = torch.ones(6, 8)
        >>> X[:, 2:6] = 0
        >>> Y = corr2d(X, torch.tensor([[1., -1.]]))
        >>> conv = Conv2D(kernel_size=(1, 2))
        >>> [name for name, _ in conv.named_parameters()], conv(X).shape
        (['weight', 'bias'], torch.Size([6, 7]))

    Forbidden: convolution of any kind (F.conv*, torch.conv*, nn.Conv*, convolution), unfold, fold.
    """

    def __init__(self, kernel_size):
        """Create ``weight`` (shape ``kernel_size``) and ``bias`` (shape ``(1,)``) as parameters.

        创建可学习参数：weight 形状为 kernel_size，bias 形状为 (1,)，均随机初始化。

        Call ``super().__init__()`` first (not ``super().__init()``: that is a typo that fails),
        then wrap the tensors in ``nn.Parameter`` so that ``parameters()`` and optimisers see them.
        An int ``kernel_size`` ``k`` means ``(k, k)``.

        Example::

            >>> conv = Conv2D((1, 2))
            >>> conv.weight.shape, conv.bias.shape
            (torch.Size([1, 2]), torch.Size([1]))

        Forbidden: convolution of any kind (F.conv*, torch.conv*, nn.Conv*, convolution), unfold, fold.
        """
        raise NotImplementedError("Conv2D.__init__: not implemented yet")

    def forward(self, x):
        """Return ``corr2d(x, self.weight) + self.bias`` for a 2-D ``x``.

        前向计算：对输入做互相关再加偏置。

        The output has shape ``(H - h + 1, W - w + 1)`` and is differentiable with respect to
        ``x``, ``weight`` and ``bias``.

        Example::

            >>> conv = Conv2D((1, 2))
            >>> with torch.no_grad():
            ...     _ = conv.weight.copy_(torch.tensor([[1., -1.]]))
            ...     _ = conv.bias.zero_()
            >>> conv(torch.tensor([[1., 1., 0., 0., 1.]]))
            tensor([[ 0.,  1.,  0., -1.]], grad_fn=<AddBackward0>)

        Forbidden: convolution of any kind (F.conv*, torch.conv*, nn.Conv*, convolution), unfold, fold.
        """
        raise NotImplementedError("Conv2D.forward: not implemented yet")
