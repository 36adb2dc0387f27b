# expect: full marks
"""view with ATen's own infer_size and computeStride copied (walking the old dims from the last,
as aten/src/ATen/TensorUtils.cpp does), broadcast_shape and broadcast_to written with loops,
one_hot with a Python number as scatter_'s src."""


def view(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    if not shape:
        raise TypeError("view() needs a shape")
    shape = [int(s) if not isinstance(s, bool) and isinstance(s, int) else operator.index(s) for s in shape]
    numel = x.numel()
    # at::infer_size
    infer, newsize = None, 1
    for dim, s in enumerate(shape):
        if s == -1:
            if infer is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer = dim
        elif s >= 0:
            newsize *= s
        else:
            raise RuntimeError(f"invalid shape dimension {s}")
    if numel == newsize or (infer is not None and newsize > 0 and numel % newsize == 0):
        if infer is not None:
            if newsize == 0:
                raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} because the unspecified "
                                   "dimension size -1 can be any value and is ambiguous")
            shape[infer] = numel // newsize
    else:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    # at::detail::computeStride
    oldshape, oldstride = list(x.shape), list(x.stride())
    if numel == 0:
        if oldshape == shape:
            return x.as_strided(shape, oldstride, x.storage_offset())
        stride, acc = [0] * len(shape), 1
        for d in range(len(shape) - 1, -1, -1):
            stride[d] = acc
            acc *= max(shape[d], 1)
        return x.as_strided(shape, stride, x.storage_offset())
    if not oldshape:
        return x.as_strided(shape, [1] * len(shape), x.storage_offset())
    newstride = [0] * len(shape)
    view_d = len(shape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel, view_numel = 1, 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1
                             and oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                                   "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        raise RuntimeError("view size is not compatible with input tensor's size and stride")
    return x.as_strided(shape, newstride, x.storage_offset())


def broadcast_shape(*shapes):
    shapes = [(s,) if isinstance(s, int) else s for s in shapes if s is not None]
    if not all(isinstance(s, (tuple, list)) for s in shapes):
        raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {shapes}")
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            d = len(s) - ndim + i
            if d < 0 or s[d] == 1:
                continue
            if size != 1 and s[d] != size:
                raise RuntimeError(f"shape mismatch: objects cannot be broadcast to a single shape ({shapes})")
            if s[d] < 0:
                raise ValueError("Attempting to broadcast a dimension with negative length!")
            size = s[d]
        out.append(size)
    return tuple(out)


def broadcast_to(x, shape):
    shape = tuple(shape)
    lead = len(shape) - x.dim()
    if lead < 0:
        raise RuntimeError("the target shape has fewer dims than x")
    stride = []
    for i, size in enumerate(shape):
        if i < lead:
            stride.append(0)
            continue
        old = x.shape[i - lead]
        if size == -1 or size == old:
            stride.append(x.stride(i - lead) if old != 1 or size == 1 else 0)
        elif old == 1:
            stride.append(0)
        else:
            raise RuntimeError(f"The expanded size of the tensor ({size}) must match the existing size ({old})")
    sizes = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
    if any(s == -1 for s in shape[:lead]):
        raise RuntimeError("-1 is not allowed in a leading, non-existing dimension")
    for i in reversed(range(lead)):  # a new size-1 dim: the extent of the dim after it, as ATen's expand
        if sizes[i] == 1 and x.dim() > 0:
            stride[i] = sizes[i + 1] * stride[i + 1]
    return x.as_strided(sizes, stride, x.storage_offset())


def one_hot(labels, num_classes):
    if labels.dtype != torch.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if labels.numel() == 0 and num_classes <= 0:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    if num_classes == -1:
        num_classes = int(labels.max()) + 1 if labels.numel() else 0
    out = torch.zeros(*labels.shape, num_classes, dtype=torch.int64, device=labels.device)
    return scatter_(out, -1, labels.unsqueeze(-1), 1)
