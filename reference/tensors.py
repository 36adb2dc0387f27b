"""Tensors by hand: views, broadcasting, scatter and gather built from strides and indexing.

(张量手写实现：用步长与索引实现 view、广播、scatter、gather 与 one_hot。)

Where a function below lists forbidden calls, it may not use numpy or another array library either,
not even on copies of its values (`x.tolist()`): what they compute cannot be watched.
(列出禁用调用的函数也不得使用 numpy 或其他数组库，即使作用于数值的副本：它们的计算无法被监视。)
"""

import operator
from collections.abc import Sequence

import torch

# BEGIN REMOVE
_VIEW_STRIDE_ERROR = (
    "view size is not compatible with input tensor's size and stride (at least one dimension "
    "spans across two contiguous subspaces). Use .reshape(...) instead."
)


def _infer_size(shape, numel):
    """Resolve one ``-1`` in ``shape`` for a tensor of ``numel`` elements (ATen ``infer_size``)."""
    result = list(shape)
    known = 1
    infer_dim = None
    for d, size in enumerate(shape):
        if size == -1:
            if infer_dim is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer_dim = d
        elif size >= 0:
            known *= size
        else:
            raise RuntimeError(
                f"invalid shape dimension {size} at index {d} of shape {list(shape)}"
            )
    if numel == known or (infer_dim is not None and known > 0 and numel % known == 0):
        if infer_dim is not None:
            if known == 0:
                raise RuntimeError(
                    f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
                    "unspecified dimension size -1 can be any value and is ambiguous"
                )
            result[infer_dim] = numel // known
        return result
    raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")


def _compute_stride(old_shape, old_stride, new_shape):
    """Strides that let ``new_shape`` read the same memory as ``old_shape``/``old_stride``.

    ATen's ``computeStride``: walk the old dims from the last one, grouping them into chunks of
    dims that are contiguous with each other; each chunk must be covered exactly by consecutive
    new dims. Returns ``None`` when some new dim would span two chunks.
    """
    if len(old_shape) == 0:
        return [1] * len(new_shape)
    numel = 1
    for size in old_shape:
        numel *= size
    if numel == 0 and list(old_shape) == list(new_shape):
        return list(old_stride)
    new_stride = [0] * len(new_shape)
    if numel == 0:
        # Nothing is ever read: any strides do; ATen uses contiguous ones (a 0 counted as 1).
        for d in range(len(new_shape) - 1, -1, -1):
            if d == len(new_shape) - 1:
                new_stride[d] = 1
            else:
                new_stride[d] = max(new_shape[d + 1], 1) * new_stride[d + 1]
        return new_stride
    view_d = len(new_shape) - 1
    chunk_base_stride = old_stride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        # A chunk ends at dim 0, or where the dim before is not contiguous with this chunk.
        chunk_ends = tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1
            and old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride
        )
        if chunk_ends:
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_stride[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_stride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return new_stride


def _wrap_dim(dim, ndim):
    """Wrap a possibly negative ``dim`` as ATen does (a 0-dim tensor counts as 1-dim)."""
    dim = operator.index(dim)
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def _as_1d(t):
    """A 0-dim tensor as a 1-element 1-dim view (PyTorch's "ensure_nonempty_dim" rule)."""
    return t.unsqueeze(0) if t.dim() == 0 else t


def _check_index_dtype(name, index):
    if index.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")


def _check_bounds(index, size, dim):
    """Raise like PyTorch for the first index value outside ``[0, size)``."""
    bad = (index < 0) | (index >= size)
    if bool(bad.any()):
        value = int(index[bad][0])
        raise RuntimeError(f"index {value} is out of bounds for dimension {dim} with size {size}")


def _grid(index, dim):
    """Advanced-indexing coordinates of every element of ``index``, with ``dim`` replaced by its value.

    Element ``p`` of ``index`` addresses ``(p[0], ..., index[p], ..., p[-1])``; the coordinate
    tensors broadcast to ``index.shape``.
    """
    coords = []
    for d, n in enumerate(index.shape):
        if d == dim:
            # A row-major int64 copy, so that the indexing result is row-major like torch.gather's.
            dense = torch.empty_like(index, dtype=torch.long, memory_format=torch.contiguous_format)
            coords.append(dense.copy_(index))
        else:
            # 0..n-1 along dim d; trailing None dims make it broadcast against the later dims.
            trailing = (None,) * (index.dim() - 1 - d)
            coords.append(torch.arange(n, device=index.device)[(slice(None),) + trailing])
    return tuple(coords)


def _scatter_checks(name, target, dim, index, src):
    """Validate a scatter call in PyTorch's order; returns the wrapped dim, or None for a no-op."""
    dim = _wrap_dim(dim, target.dim())
    if index.numel() != 0:
        _check_index_dtype(name, index)
    if isinstance(src, torch.Tensor) and src.dtype != target.dtype:
        raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
    if index.numel() == 0:
        return None
    ndim = max(target.dim(), 1)
    if max(index.dim(), 1) != ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    t1, i1 = _as_1d(target), _as_1d(index)
    wrong = any(i1.shape[d] > t1.shape[d] for d in range(ndim) if d != dim)
    if not wrong and isinstance(src, torch.Tensor):
        for d in range(ndim):
            if src.dim() == 0:
                src_size = 1
            elif d < src.dim():
                src_size = src.shape[d]
            else:
                raise IndexError(
                    f"Dimension out of range (expected to be in range of [{-src.dim()}, "
                    f"{src.dim() - 1}], but got {d})"
                )
            if i1.shape[d] > src_size:
                wrong = True
                break
    if isinstance(src, torch.Tensor) and max(src.dim(), 1) != ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if wrong:
        message = (
            f"Expected index {list(index.shape)} to be no larger than self {list(target.shape)} "
            f"apart from dimension {dim}"
        )
        if isinstance(src, torch.Tensor):
            message += f" and to be no larger size than src {list(src.shape)}"
        raise RuntimeError(message)
    _check_bounds(index, t1.shape[dim], dim)
    return dim


def _scatter_values(index, src):
    """The part of ``src`` that ``index`` addresses: its leading ``index.shape`` block."""
    return _as_1d(src)[tuple(slice(0, n) for n in _as_1d(index).shape)]
# END REMOVE


def view(x, *shape):
    """Return ``x.view(*shape)`` built with ``as_strided``: same memory, new shape and strides.

    按 PyTorch 的步长兼容规则计算新步长，用 as_strided 实现 view（与原张量共享内存）。

    Must match ``Tensor.view`` exactly: the same shape **and strides**, the same storage and
    ``storage_offset`` (a write through the result shows in ``x``), gradients flow back to ``x``.
    ``shape`` is given as ints (``view(x, 2, 3)``) or as one tuple/list/``torch.Size``
    (``view(x, (2, 3))``); one entry may be ``-1`` and is inferred from ``x.numel()``.

    Non-contiguous inputs work exactly where ``Tensor.view`` works. Group the dims of ``x``, from
    the last one, into "chunks" of dims that are contiguous with each other (``stride[d-1] ==
    size[d] * stride[d]``, size-1 dims never break a chunk); every chunk must be covered by
    consecutive new dims whose sizes multiply to the chunk's element count, and inside a chunk the
    new strides are contiguous multiples of the chunk's last stride. A 0-dim ``x`` gives all
    strides 1; an ``x`` with no elements gets contiguous strides (or keeps its own for the same
    shape).

    Raises ``RuntimeError`` as ``Tensor.view`` does: "shape '[4, 2]' is invalid for input of size
    6", "only one dimension can be inferred", "invalid shape dimension -2 ...", a ``-1`` that is
    ambiguous for a tensor with no elements, and "view size is not compatible with input tensor's
    size and stride ..." when some new dim would span two chunks. No shape at all, or a non-int
    entry, raises ``TypeError`` (as ``x.view()`` does).

    Example::

        >>> x = torch.randn(5, 4)
        >>> view(x, 20).shape, view(x, -1, 5).shape  # -1 is inferred from the other dims
        (torch.Size([20]), torch.Size([4, 5]))
        >>> y = view(x, 2, 10)
        >>> y[0, 0] = 100.
        >>> x[0, 0]  # shared memory: the write through y shows in x
        tensor(100.)
        >>> t = torch.tensor([[0, 1, 2], [3, 4, 5]]).t()  # non-contiguous, strides (1, 3)
        >>> view(t, 3, 1, 2).stride()
        (1, 6, 3)
        >>> view(t, 6)
        Traceback (most recent call last):
            ...
        RuntimeError: view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.

    Forbidden: view, view_as, reshape, reshape_as, flatten, unflatten, contiguous, clone, _unsafe_view.
    """
    # BEGIN SOLUTION
    if len(shape) == 0:
        raise TypeError("view() missing the new shape, e.g. view(x, 2, 3) or view(x, (2, 3))")
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    shape = [operator.index(size) for size in shape]
    size = _infer_size(shape, x.numel())
    stride = _compute_stride(list(x.shape), list(x.stride()), size)
    if stride is None:
        raise RuntimeError(_VIEW_STRIDE_ERROR)
    return x.as_strided(size, stride, x.storage_offset())
    # END SOLUTION


def broadcast_shape(*shapes):
    """Return the shape that all ``shapes`` broadcast to, as a tuple of ints.

    计算若干形状按广播规则得到的结果形状（与 torch.broadcast_shapes 相同）。

    As ``torch.broadcast_shapes``: align the shapes on the right; in each position the sizes must
    be equal or 1 (a missing leading dim counts as 1), and the result takes the size that is not 1.
    An int ``n`` stands for the shape ``(n,)``, ``None`` entries are skipped, and no shapes give
    ``()``. Size 0 broadcasts like any other size (``(0,)`` with ``(1,)`` gives ``(0,)``).

    Raises ``RuntimeError`` for incompatible shapes ("Attempting to broadcast a dimension of
    length 2 at -1! ...") and for an entry that is not an int or a sequence of ints;
    ``ValueError`` when a negative size would be broadcast into the result.

    Example::

        >>> broadcast_shape((1, 2), (3, 1))  # the shape of x + y for x: (1, 2), y: (3, 1)
        (3, 2)
        >>> broadcast_shape((2,), (3, 1), (1, 1, 1))
        (1, 3, 2)
        >>> broadcast_shape((3,), (2,))
        Traceback (most recent call last):
            ...
        RuntimeError: Attempting to broadcast a dimension of length 2 at -1! Mismatching argument at index 1 had (2,); but expected shape should be broadcastable to [3]

    Forbidden: broadcast_shapes, broadcast_tensors, broadcast_to, expand.
    """
    # BEGIN SOLUTION
    shapes = [(s,) if isinstance(s, int) else s for s in shapes if s is not None]
    for s in shapes:
        if not isinstance(s, Sequence):
            raise RuntimeError(
                f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {s}"
            )
    if not shapes:
        return ()
    result = [1] * max(len(s) for s in shapes)
    for arg_idx, s in enumerate(shapes):
        for idx in range(-1, -1 - len(s), -1):
            size = operator.index(s[idx])
            if size == result[idx] or size == 1:
                continue
            if result[idx] == 1:
                if size < 0:
                    raise ValueError("Attempting to broadcast a dimension with negative length!")
                result[idx] = size
                continue
            raise RuntimeError(
                f"Attempting to broadcast a dimension of length {size} at {idx}! Mismatching "
                f"argument at index {arg_idx} had {s}; but expected shape should be broadcastable "
                f"to {result}"
            )
    return tuple(result)
    # END SOLUTION


def broadcast_to(x, shape):
    """Return ``x`` broadcast to ``shape`` without copying: a stride-0 view built with ``as_strided``.

    用 as_strided 和 0 步长实现广播（不复制数据，与原张量共享内存）。

    As ``torch.broadcast_to`` (that is ``x.expand(shape)``): align ``x``'s dims with the right end of
    ``shape``; a dim of size 1 may grow to any size and gets stride 0, a dim whose size is kept keeps
    its stride, ``-1`` keeps the existing size (not allowed in a new leading dim), and new leading
    dims get stride 0 when their size is not 1 (a new size-1 dim gets ``size * stride`` of the dim
    after it, as ATen does). A 0-dim ``x`` gets stride 0 everywhere. The result shares storage and
    ``storage_offset`` with ``x`` and is differentiable (the gradient sums over broadcast dims).

    Raises ``RuntimeError`` when ``shape`` has fewer dims than ``x``, when a size differs from a
    non-1 size of ``x``, for ``-1`` in a new leading dim, and for any other negative size. A shape
    with a size 0 (or a ``-1`` that keeps a size 0 of ``x``) before a negative size is not graded
    (``torch.broadcast_to`` returns a malformed tensor there). Sizes are ints: a shape that holds a
    float size is not graded.

    Example::

        >>> x = torch.tensor([[1, 2]])
        >>> y = broadcast_to(x, (3, 2))
        >>> y
        tensor([[1, 2],
                [1, 2],
                [1, 2]])
        >>> y.stride()
        (0, 1)
        >>> broadcast_to(torch.arange(3), (2, 1, 3)).stride()
        (0, 3, 1)

    Forbidden: expand, expand_as, broadcast_to, broadcast_tensors, repeat, tile.
    """
    # BEGIN SOLUTION
    shape = [operator.index(size) for size in shape]
    ndim, xdim = len(shape), x.dim()
    if ndim < xdim:
        raise RuntimeError(
            f"expand: the number of sizes provided ({ndim}) must be greater or equal to the number "
            f"of dimensions in the tensor ({xdim})"
        )
    sizes, strides = [0] * ndim, [0] * ndim
    for i in range(ndim - 1, -1, -1):
        d = xdim - ndim + i  # the dim of x aligned with position i (negative: a new leading dim)
        target = shape[i]
        if d >= 0:
            size, stride = x.shape[d], x.stride(d)
            if target == -1:
                target = size
        else:
            if target == -1 and xdim > 0:
                raise RuntimeError(
                    f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                    f"non-existing dimension {i}"
                )
            size = 1
            stride = sizes[i + 1] * strides[i + 1] if i + 1 < ndim and xdim > 0 else 0
        if target < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {target}: {shape}")
        if size != target:
            if size != 1:
                raise RuntimeError(
                    f"The expanded size of the tensor ({target}) must match the existing size "
                    f"({size}) at non-singleton dimension {i}.  Target sizes: {shape}.  "
                    f"Tensor sizes: {list(x.shape)}"
                )
            size, stride = target, 0
        sizes[i], strides[i] = size, stride
    return x.as_strided(sizes, strides, x.storage_offset())
    # END SOLUTION


def scatter_(target, dim, index, src):
    """Write ``src`` into ``target`` at the positions ``index`` gives along ``dim``, in place.

    按 index 在 dim 维上把 src 的值原地写入 target（与 Tensor.scatter_ 相同），返回 target 本身。

    As ``target.scatter_(dim, index, src)``. For a 3-D ``target``::

        target[index[i][j][k]][j][k] = src[i][j][k]  # if dim == 0
        target[i][index[i][j][k]][k] = src[i][j][k]  # if dim == 1
        target[i][j][index[i][j][k]] = src[i][j][k]  # if dim == 2

    and likewise for any rank. ``dim`` is an int and may be negative (a float ``dim`` is not graded);
    ``src`` is a tensor of ``target``'s dtype or a Python number (written everywhere ``index``
    points). ``index`` (int64 or int32) has the same number of dims as ``target`` and ``src`` (a
    0-dim tensor counts as 1-dim), with
    ``index.size(d) <= target.size(d)`` for ``d != dim`` and ``index.size(d) <= src.size(d)`` for
    every ``d``; only the leading ``index.shape`` block of ``src`` is used. An empty ``index`` writes
    nothing, whatever its number of dims (this wins over the rule on dims above), but a ``src`` of
    another dtype still raises there (as in PyTorch). Which value wins when ``index`` repeats a
    position is unspecified (as in PyTorch).
    Differentiable with respect to ``target`` (when it is not a leaf) and ``src``.

    Everything is validated before anything is written, so on error ``target`` is unchanged:
    ``IndexError`` for ``dim`` out of range; ``RuntimeError`` for an index dtype other than
    int64/int32, a ``src`` of another dtype, mismatched ranks or sizes, and an index value outside
    ``[0, target.size(dim))`` ("index 3 is out of bounds for dimension 0 with size 3"); for an index
    value outside that range ``IndexError``, which indexing raises there, counts as well.

    Example::

        >>> src = torch.arange(1, 11).reshape((2, 5))
        >>> index = torch.tensor([[0, 1, 2, 0]])
        >>> scatter_(torch.zeros(3, 5, dtype=src.dtype), 0, index, src)
        tensor([[1, 0, 0, 4, 0],
                [0, 2, 0, 0, 0],
                [0, 0, 3, 0, 0]])
        >>> scatter_(torch.zeros(2, 4), 1, torch.tensor([[1], [3]]), 7.0)
        tensor([[0., 7., 0., 0.],
                [0., 0., 0., 7.]])

    Forbidden: the scatter family (scatter, scatter_, scatter_add, scatter_add_, scatter_reduce, scatter_reduce_).
    """
    # BEGIN SOLUTION
    dim = _scatter_checks("scatter", target, dim, index, src)
    if dim is None:
        return target
    if isinstance(src, torch.Tensor):
        values = _scatter_values(index, src)
    else:
        values = target.new_full((), src)  # a Python number, converted as PyTorch does
    _as_1d(target).index_put_(_grid(_as_1d(index), dim), values)
    return target
    # END SOLUTION


def scatter_add_(target, dim, index, src):
    """Add ``src`` into ``target`` at the positions ``index`` gives along ``dim``, in place.

    按 index 在 dim 维上把 src 原地累加到 target（重复的位置会累加），返回 target 本身。

    As ``target.scatter_add_(dim, index, src)``: the same addressing, shape rules and errors as
    :func:`scatter_`, but ``target[...index...] += src[...]``, so values whose index repeats a
    position all add up. ``src`` must be a tensor of ``target``'s dtype. ``dim`` is an int and may
    be negative (a float ``dim`` is not graded). Validated before writing: on error ``target`` is
    unchanged. Differentiable like :func:`scatter_`.

    Example::

        >>> scatter_add_(torch.zeros(3), 0, torch.tensor([1, 1, 1]), torch.tensor([5., 6., 7.]))
        tensor([ 0., 18.,  0.])
        >>> scatter_add_(torch.ones(2, 3), 1, torch.tensor([[0, 0], [2, 1]]), torch.ones(2, 2))
        tensor([[3., 1., 1.],
                [1., 2., 2.]])

    Forbidden: the scatter family (scatter, scatter_, scatter_add, scatter_add_, scatter_reduce, scatter_reduce_), index_add, index_add_.
    """
    # BEGIN SOLUTION
    if not isinstance(src, torch.Tensor):
        raise TypeError(f"scatter_add_(): argument 'src' must be Tensor, not {type(src).__name__}")
    dim = _scatter_checks("scatter", target, dim, index, src)
    if dim is None:
        return target
    _as_1d(target).index_put_(
        _grid(_as_1d(index), dim), _scatter_values(index, src), accumulate=True
    )
    return target
    # END SOLUTION


def gather(x, dim, index):
    """Read ``x`` at the positions ``index`` gives along ``dim``; the result has ``index``'s shape.

    按 index 在 dim 维上从 x 取值，结果形状与 index 相同（与 torch.gather 相同）。

    As ``torch.gather(x, dim, index)``. For a 3-D ``x``::

        out[i][j][k] = x[index[i][j][k]][j][k]  # if dim == 0
        out[i][j][k] = x[i][index[i][j][k]][k]  # if dim == 1
        out[i][j][k] = x[i][j][index[i][j][k]]  # if dim == 2

    and likewise for any rank. ``dim`` is an int and may be negative (a float ``dim`` is not
    graded). ``index`` (int64 or int32) has as many dims as ``x`` (a 0-dim tensor counts as 1-dim)
    and ``index.size(d) <= x.size(d)`` for ``d != dim`` (along ``dim`` it may be larger: positions
    can repeat). The result has ``x``'s dtype and device, and the gradient flows back to ``x``
    (repeated positions accumulate). An empty ``index`` gives an empty result of ``index``'s shape
    without further checks. The result's strides are not graded (``torch.gather``'s are row-major).

    Raises ``IndexError`` for ``dim`` out of range and ``RuntimeError`` for another index dtype,
    mismatched ranks or sizes, and an index value outside ``[0, x.size(dim))``; for an index value
    outside that range ``IndexError``, which indexing raises there, counts as well.

    Example::

        >>> x = torch.arange(12.).reshape(3, 4)
        >>> gather(x, 1, torch.tensor([[0, 0], [1, 0], [3, 3]]))
        tensor([[ 0.,  0.],
                [ 5.,  4.],
                [11., 11.]])
        >>> gather(x, 0, torch.tensor([[2, 1, 0, 1]]))
        tensor([[8., 5., 2., 7.]])

    Forbidden: gather, take_along_dim.
    """
    # BEGIN SOLUTION
    dim = _wrap_dim(dim, x.dim())
    if index.numel() == 0:
        return x.new_empty(index.shape)
    _check_index_dtype("gather", index)
    ndim = max(x.dim(), 1)
    if max(index.dim(), 1) != ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    x1, i1 = _as_1d(x), _as_1d(index)
    for d in range(ndim):
        if d != dim and i1.shape[d] > x1.shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {list(index.shape)} to be no "
                f"larger than self {list(x.shape)} apart from dimension {dim}"
            )
    _check_bounds(index, x1.shape[dim], dim)
    out = x1[_grid(i1, dim)]
    return out[0] if index.dim() == 0 else out
    # END SOLUTION


def one_hot(labels, num_classes):
    """Return the one-hot encoding of int64 ``labels``, built with your own :func:`scatter_`.

    用自己写的 scatter_ 实现 one-hot 编码（与 torch.nn.functional.one_hot 相同，结果为 int64）。

    As ``torch.nn.functional.one_hot(labels, num_classes)``: the result has shape ``labels.shape +
    (C,)``, dtype int64, ``labels``' device, with ``out[..., labels[...]] = 1`` and 0 elsewhere.
    ``num_classes=-1`` means ``C = labels.max() + 1``; ``num_classes`` is an int (a float
    ``num_classes`` is not graded). Build it as zeros and scatter 1 along the last dim with
    ``labels.unsqueeze(-1)`` as the index.

    Raises ``RuntimeError`` like PyTorch, checked in this order: labels not int64 ("one_hot is only
    applicable to index tensor of type LongTensor."); empty labels with ``num_classes <= 0`` ("Can
    not infer total number of classes from empty tensor."); a negative label ("Class values must
    be non-negative."); a label ``>= num_classes`` when ``num_classes != -1`` ("Class values must be
    smaller than num_classes."). Empty labels with ``num_classes > 0`` give an empty result.

    Example::

        >>> one_hot(torch.tensor([0, 2, 1]), -1)
        tensor([[1, 0, 0],
                [0, 0, 1],
                [0, 1, 0]])
        >>> one_hot(torch.tensor([3]), 5)
        tensor([[0, 0, 0, 1, 0]])

    Forbidden: one_hot.
    """
    # BEGIN SOLUTION
    if labels.dtype != torch.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    num_classes = operator.index(num_classes)
    if labels.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return labels.new_zeros(tuple(labels.shape) + (num_classes,))
    if int(labels.min()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(labels.max()) + 1
    elif num_classes <= int(labels.max()):
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = labels.new_zeros(tuple(labels.shape) + (num_classes,))
    return scatter_(out, -1, labels.unsqueeze(-1), 1)
    # END SOLUTION
