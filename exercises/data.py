"""Datasets and loaders: a CSV-backed Dataset and a DataLoader factory.

(数据集与数据加载：读取 CSV 文件的 Dataset，以及按训练/验证配置好的 DataLoader。)
"""

from __future__ import annotations

import csv
import os
from typing import Any, Callable, Optional, Union

import torch
from torch.utils.data import DataLoader, Dataset


class CSVDataset(Dataset):
    """A map-style ``Dataset`` over a CSV file: float features, an integer label last.

    一个基于 CSV 文件的 map-style 数据集：最后一列是整数类别标签，其余列是浮点特征。

    The first non-blank row of the file is the header and is skipped. Every later row is one
    sample: all columns but the last are parsed as floats, the last as an ``int``. Blank lines
    (for example the trailing newline(s) at the end of the file) are ignored, wherever they are.
    The file is read with the standard :mod:`csv` module (no pandas), once, in ``__init__``.

    ``ds[i]`` returns ``(features, label)``:

    * ``features``: a new ``torch.float32`` tensor of shape ``(n_features,)``, where
      ``n_features`` is the number of columns minus one;
    * ``label``: a 0-dim ``torch.int64`` tensor (``torch.tensor(3)``, not ``torch.tensor([3])``).

    When ``transform`` is given it is applied to ``features``, and ``target_transform`` to
    ``label``, before returning (the notes' ``MyDataset`` pattern). ``len(ds)`` is the number of
    data rows (the header and blank lines are not counted). Indexing follows a Python list:
    negative indices count from the end, and an index out of range raises ``IndexError`` (which
    is what lets ``for x in ds`` stop).

    Errors: a row whose number of columns differs from the header's, a feature that is not a
    float, or a label that is not an integer raises ``ValueError`` naming the line.

    Example::

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "toy.csv")
        >>> with open(path, "w") as f:
        ...     _ = f.write("x1,x2,label\\n0.5,1.5,0\\n2.0,3.0,1\\n\\n")
        >>> ds = CSVDataset(path)
        >>> len(ds)
        2
        >>> ds[1]
        (tensor([2., 3.]), tensor(1))
        >>> ds[0][0].dtype, ds[0][1].dtype, ds[0][1].shape
        (torch.float32, torch.int64, torch.Size([]))
        >>> CSVDataset(path, transform=lambda x: x * 2, target_transform=lambda y: y + 10)[0]
        (tensor([1., 3.]), tensor(10))

    Forbidden: nothing.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike],
        transform: Optional[Callable[[torch.Tensor], Any]] = None,
        target_transform: Optional[Callable[[torch.Tensor], Any]] = None,
    ) -> None:
        """Read and parse the whole CSV file at ``path``; keep the two transforms.

        读取并解析整个 CSV 文件（跳过表头和空行），保存两个变换函数。

        Parsing happens here, once, so that ``__getitem__`` is cheap and a malformed file fails
        at construction with ``ValueError`` (a missing file raises ``FileNotFoundError``).

        Example::

            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
            >>> with open(path, "w") as f:
            ...     _ = f.write("a,b,y\\n1,2,3\\n")
            >>> len(CSVDataset(path))
            1

        Forbidden: nothing.
        """
        raise NotImplementedError("CSVDataset.__init__: not implemented yet")

    def __len__(self) -> int:
        """The number of data rows (header and blank lines excluded).

        数据行的数量（不含表头和空行）。

        Example::

            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
            >>> with open(path, "w") as f:
            ...     _ = f.write("a,y\\n1,0\\n2,1\\n3,0\\n")
            >>> len(CSVDataset(path))
            3

        Forbidden: nothing.
        """
        raise NotImplementedError("CSVDataset.__len__: not implemented yet")

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        """Sample ``index`` as ``(features, label)``, after the transforms when given.

        返回第 ``index`` 个样本 ``(特征, 标签)``；给定变换时先应用变换。

        ``features`` is a fresh float32 tensor of shape ``(n_features,)`` (so an in-place
        transform cannot corrupt the dataset), ``label`` a 0-dim int64 tensor. Negative indices
        count from the end; out of range raises ``IndexError``.

        Example::

            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
            >>> with open(path, "w") as f:
            ...     _ = f.write("a,b,y\\n1,2,3\\n4,5,6\\n")
            >>> CSVDataset(path)[-1]
            (tensor([4., 5.]), tensor(6))

        Forbidden: nothing.
        """
        raise NotImplementedError("CSVDataset.__getitem__: not implemented yet")


def make_loader(
    dataset: Dataset, batch_size: int, train: bool, num_workers: int = 0
) -> DataLoader:
    """A ``DataLoader`` for training (shuffled, last partial batch dropped) or for evaluation.

    构造 DataLoader：训练时打乱顺序并丢弃最后不完整的批次；验证/测试时按原顺序且保留最后一批。

    ``train=True`` gives ``shuffle=True, drop_last=True``: each epoch sees the samples in a new
    random order (drawn from torch's global generator, so ``set_seed`` makes it reproducible)
    and every batch has exactly ``batch_size`` samples. ``train=False`` gives
    ``shuffle=False, drop_last=False``: samples in dataset order, the last batch possibly
    smaller, so evaluation sees every sample exactly once. ``batch_size`` and ``num_workers``
    are passed on unchanged (``num_workers`` is the number of worker processes reading data;
    0 reads in the main process).

    Example::

        >>> ds = torch.utils.data.TensorDataset(torch.arange(10.0))
        >>> [len(b[0]) for b in make_loader(ds, batch_size=4, train=True)]
        [4, 4]
        >>> [b[0].tolist() for b in make_loader(ds, batch_size=4, train=False)]
        [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]

    Forbidden: nothing.
    """
    raise NotImplementedError("make_loader: not implemented yet")
