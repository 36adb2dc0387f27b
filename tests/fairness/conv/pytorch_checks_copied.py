# expect: full marks
"""pad2d and pool2d that copy PyTorch's own argument checks (RuntimeError with PyTorch's messages), and
the notes' pool2d: a loop over output pixels."""


def pad2d(X, padding):
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    if 2 * X.dim() < 4:  # F.pad: "Padding length should be less than or equal to two times the input dimension"
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension "
                           f"but got padding length 4 and input of dimension {X.dim()}")
    H, W = X.shape[-2:]
    rows = X.new_zeros(X.shape[:-2] + (ph, W))
    X = torch.cat([rows, X, rows], dim=-2)
    cols = X.new_zeros(X.shape[:-1] + (pw,))
    return torch.cat([cols, X, cols], dim=-1)


def pool2d(X, pool_size, mode="max", stride=1, padding=0):
    if mode not in ("max", "avg"):
        raise ValueError(f"mode must be 'max' or 'avg', got {mode!r}")
    two = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    (p_h, p_w), (s_h, s_w), (pad_h, pad_w) = two(pool_size), two(stride), two(padding)
    # The checks of ATen's pool2d_shape_check, with its messages.
    if X.dim() < 2:
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    if p_h <= 0 or p_w <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {p_h} kW: {p_w}")
    if s_h <= 0 or s_w <= 0:
        raise RuntimeError("stride should not be zero")
    if pad_h < 0 or pad_w < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {min(pad_h, pad_w)}")
    if pad_h > p_h // 2 or pad_w > p_w // 2:
        raise RuntimeError("pad should be at most half of effective kernel size")
    H, W = X.shape[-2:]
    out_h, out_w = (H + 2 * pad_h - p_h) // s_h + 1, (W + 2 * pad_w - p_w) // s_w + 1
    if out_h < 1 or out_w < 1:
        raise RuntimeError(f"Given input size: ({H}x{W}). Calculated output size: ({out_h}x{out_w}). "
                           "Output size is too small")
    if mode == "max":
        low = float("-inf") if X.is_floating_point() else torch.iinfo(X.dtype).min
        P = X.new_full(X.shape[:-2] + (H + 2 * pad_h, W + 2 * pad_w), low)
    else:
        P = X.new_zeros(X.shape[:-2] + (H + 2 * pad_h, W + 2 * pad_w))
    P = torch.cat([P[..., :pad_h, :], torch.cat([P[..., pad_h:pad_h + H, :pad_w], X,
                                                 P[..., pad_h:pad_h + H, pad_w + W:]], -1),
                   P[..., pad_h + H:, :]], -2)
    rows = []
    for i in range(out_h):
        row = []
        for j in range(out_w):
            window = P[..., i * s_h:i * s_h + p_h, j * s_w:j * s_w + p_w].flatten(-2)
            if mode == "max":
                # the first maximum, and a NaN wins, as F.max_pool2d picks
                nan = window.isnan()
                pick = torch.where(nan.any(-1), nan.int().argmax(-1), window.argmax(-1))
                row.append(window.gather(-1, pick.unsqueeze(-1)).squeeze(-1))
            elif X.is_floating_point():
                row.append(window.sum(-1) / (p_h * p_w))
            else:
                row.append(torch.div(window.sum(-1), p_h * p_w, rounding_mode="trunc"))
        rows.append(torch.stack(row, -1))
    return torch.stack(rows, -2)
