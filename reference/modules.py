"""Building models with ``nn.Module``: layers, parameter containers, initialisation, counting.

(用 ``nn.Module`` 搭建模型：自定义层、参数容器、权重初始化与参数计数。)
"""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """A two-layer perceptron ``output(act(hidden(x)))``; submodules ``hidden``, ``act``, ``output``.

    两层感知机：子模块依次命名为 ``hidden``（``nn.Linear``）、``act``（``nn.ReLU``）、``output``（``nn.Linear``）。

    The submodule names are part of the contract: ``state_dict()`` keys are ``hidden.weight``,
    ``hidden.bias``, ``output.weight``, ``output.bias``, and ``print(net)`` shows the three
    children in that order. No activation after ``output`` (the result is raw logits).

    Example::

        >>> net = MLP()
        >>> net
        MLP(
          (hidden): Linear(in_features=784, out_features=256, bias=True)
          (act): ReLU()
          (output): Linear(in_features=256, out_features=10, bias=True)
        )
        >>> net(torch.randn(2, 784)).shape
        torch.Size([2, 10])

    Forbidden: nothing.
    """

    def __init__(self, in_features: int = 784, hidden: int = 256, out_features: int = 10) -> None:
        """Register ``hidden`` (in -> hidden), ``act`` (ReLU) and ``output`` (hidden -> out), in order.

        调用父类构造函数，再按顺序注册三个子模块。

        Call ``super().__init__()`` first (the notes' ``super().__init()`` typo raises
        ``AttributeError``), then register the three submodules in this order.

        Example::

            >>> MLP(4, 3, 2).hidden
            Linear(in_features=4, out_features=3, bias=True)

        Forbidden: nothing.
        """
        # BEGIN SOLUTION
        super().__init__()
        self.hidden = nn.Linear(in_features, hidden)
        self.act = nn.ReLU()
        self.output = nn.Linear(hidden, out_features)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``output(act(hidden(x)))``.

        前向计算：线性层、ReLU、线性层。

        ``x`` has shape ``(..., in_features)``; the result ``(..., out_features)``.

        Example::

            >>> MLP(4, 3, 2)(torch.zeros(5, 4)).shape
            torch.Size([5, 2])

        Forbidden: nothing.
        """
        # BEGIN SOLUTION
        return self.output(self.act(self.hidden(x)))
        # END SOLUTION


class MyLayer(nn.Module):
    """A layer without parameters that centres its input: ``x - x.mean()``.

    不含参数的自定义层：减去输入所有元素的均值。

    Example::

        >>> layer = MyLayer()
        >>> layer(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]))
        tensor([-2., -1.,  0.,  1.,  2.])
        >>> len(list(layer.parameters()))
        0

    Forbidden: nothing.
    """

    def __init__(self) -> None:
        """Initialise the ``nn.Module`` machinery; this layer has no parameters.

        只调用父类构造函数，本层没有参数。

        Example::

            >>> MyLayer()
            MyLayer()

        Forbidden: nothing.
        """
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``x - x.mean()``: the mean over **all** elements, not per row or column.

        返回 ``x - x.mean()``（对全部元素求均值），结果的均值为 0。

        Same shape and dtype as ``x``; the result sums to zero (up to rounding).

        Example::

            >>> MyLayer()(torch.tensor([[1.0, 2.0], [3.0, 6.0]]))
            tensor([[-2., -1.],
                    [ 0.,  3.]])

        Forbidden: nothing.
        """
        # BEGIN SOLUTION
        return x - x.mean()
        # END SOLUTION


class MyListDense(nn.Module):
    """Four matrices in an ``nn.ParameterList``, applied one after another with ``torch.mm``.

    用 ``nn.ParameterList`` 保存三个 ``(4, 4)`` 与一个 ``(4, 1)`` 参数，前向依次用 ``torch.mm`` 相乘。

    ``self.params`` must be an ``nn.ParameterList`` (a plain Python list would hide the
    parameters from ``parameters()``, ``state_dict()`` and the optimiser). Its ``state_dict``
    keys are ``params.0`` ... ``params.3``.

    Example::

        >>> net = MyListDense()
        >>> [tuple(p.shape) for p in net.params]
        [(4, 4), (4, 4), (4, 4), (4, 1)]
        >>> net(torch.ones(1, 4)).shape
        torch.Size([1, 1])

    Forbidden: nothing.
    """

    def __init__(self) -> None:
        """Create ``self.params``: three ``(4, 4)`` parameters, then append a ``(4, 1)``; ``torch.randn``.

        创建 ``nn.ParameterList``：先放三个 ``torch.randn(4, 4)`` 参数，再追加一个 ``torch.randn(4, 1)``。

        Example::

            >>> type(MyListDense().params).__name__
            'ParameterList'

        Forbidden: nothing.
        """
        # BEGIN SOLUTION
        super().__init__()
        self.params = nn.ParameterList([nn.Parameter(torch.randn(4, 4)) for _ in range(3)])
        self.params.append(nn.Parameter(torch.randn(4, 1)))
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Multiply ``x`` ``(N, 4)`` by each parameter in turn with ``torch.mm``; result ``(N, 1)``.

        依次 ``x = torch.mm(x, p)``，输出形状 ``(N, 1)``。

        ``torch.mm`` takes 2-D matrices only, so ``x`` must be ``(N, 4)``; anything else raises
        ``RuntimeError``.

        Example::

            >>> net = MyListDense()
            >>> with torch.no_grad():
            ...     for p in net.params:
            ...         _ = p.fill_(1.0)
            >>> net(torch.ones(2, 4))
            tensor([[256.],
                    [256.]], grad_fn=<MmBackward0>)

        Forbidden: nothing.
        """
        # BEGIN SOLUTION
        for p in self.params:
            x = torch.mm(x, p)
        return x
        # END SOLUTION


class MyDictDense(nn.Module):
    """Three weight matrices kept in an ``nn.ParameterDict``; ``forward`` picks one by name.

    用 ``nn.ParameterDict`` 保存 ``linear1`` ``(4, 4)``、``linear2`` ``(4, 1)``、``linear3`` ``(4, 2)``，前向按名字选用。

    ``self.params`` must be an ``nn.ParameterDict`` with the keys ``linear1``, ``linear2``,
    ``linear3`` in that order (``state_dict`` keys ``params.linear1`` ...).

    Example::

        >>> net = MyDictDense()
        >>> {k: tuple(v.shape) for k, v in net.params.items()}
        {'linear1': (4, 4), 'linear2': (4, 1), 'linear3': (4, 2)}
        >>> net(torch.ones(1, 4), "linear3").shape
        torch.Size([1, 2])

    Forbidden: nothing.
    """

    def __init__(self) -> None:
        """Create ``self.params`` (``linear1``, ``linear2``), then add ``linear3``; all ``torch.randn``.

        创建 ``nn.ParameterDict``（``linear1``、``linear2``），再用 ``update`` 新增 ``linear3``。

        Example::

            >>> list(MyDictDense().state_dict())
            ['params.linear1', 'params.linear2', 'params.linear3']

        Forbidden: nothing.
        """
        # BEGIN SOLUTION
        super().__init__()
        self.params = nn.ParameterDict({
            "linear1": nn.Parameter(torch.randn(4, 4)),
            "linear2": nn.Parameter(torch.randn(4, 1)),
        })
        self.params.update({"linear3": nn.Parameter(torch.randn(4, 2))})
        # END SOLUTION

    def forward(self, x: torch.Tensor, choice: str = "linear1") -> torch.Tensor:
        """Return ``torch.mm(x, self.params[choice])``; ``choice`` defaults to ``"linear1"``.

        返回 ``torch.mm(x, params[choice])``，默认使用 ``linear1``。

        ``x`` has shape ``(N, 4)``. An unknown ``choice`` raises whatever the ``ParameterDict``
        raises for a missing key (``AttributeError`` in recent PyTorch, ``KeyError`` in old ones).

        Example::

            >>> net = MyDictDense()
            >>> net(torch.ones(3, 4)).shape, net(torch.ones(3, 4), choice="linear2").shape
            (torch.Size([3, 4]), torch.Size([3, 1]))

        Forbidden: nothing.
        """
        # BEGIN SOLUTION
        return torch.mm(x, self.params[choice])
        # END SOLUTION


def init_weights(model: nn.Module) -> None:
    """Kaiming-normal weights and zero biases for every ``nn.Linear`` / ``nn.Conv2d`` in ``model``.

    对模型中（含模型本身）每个 ``nn.Linear`` 和 ``nn.Conv2d``：权重用 Kaiming 正态初始化，偏置置零。

    In place. Visit every module of ``model`` (``model.modules()``: the model itself, its
    children and all nested descendants, e.g. inside ``nn.Sequential``). For each instance of
    ``nn.Linear`` or ``nn.Conv2d`` (subclasses included):

    * ``nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")``: normal with
      mean 0 and std ``sqrt(2 / fan_in)``, where ``fan_in`` is ``in_features`` for a linear
      layer and ``in_channels / groups * kh * kw`` for a convolution;
    * the bias, when there is one, set to zero (``bias=False`` layers have none).

    Every other module (``nn.Conv1d``, ``nn.BatchNorm2d``, ``nn.Embedding``, ...) keeps its
    values. Returns ``None``.

    Example::

        >>> net = nn.Sequential(nn.Linear(1000, 500), nn.ReLU(), nn.Sequential(nn.Conv2d(3, 8, 3)))
        >>> init_weights(net)
        >>> round(net[0].weight.std().item(), 3), round((2 / 1000) ** 0.5, 3)
        (0.045, 0.045)
        >>> bool((net[2][0].bias == 0).all())
        True

    Forbidden: nothing.
    """
    # BEGIN SOLUTION
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    # END SOLUTION


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """The number of scalar parameters in ``model`` (trainable ones only when ``trainable_only``).

    统计模型的标量参数个数（``trainable_only`` 时只计 ``requires_grad=True`` 的参数）。

    Sum ``p.numel()`` over ``model.parameters()``: a parameter shared by two submodules (tied
    weights) counts once, buffers (e.g. ``BatchNorm``'s running statistics) do not count, and
    frozen parameters (``requires_grad=False``) count only when ``trainable_only`` is false.
    Returns a Python ``int`` (``0`` for a model without parameters).

    Example::

        >>> net = MLP()
        >>> count_parameters(net)    # 784*256 + 256 + 256*10 + 10
        203530
        >>> net.hidden.requires_grad_(False)
        Linear(in_features=784, out_features=256, bias=True)
        >>> count_parameters(net), count_parameters(net, trainable_only=False)
        (2570, 203530)

    Forbidden: nothing.
    """
    # BEGIN SOLUTION
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only))
    # END SOLUTION
