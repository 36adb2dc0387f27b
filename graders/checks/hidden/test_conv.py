"""Hidden checks for conv.py: odd shapes, non-contiguous inputs, float64 and int dtypes, padding, errors."""

import pytest
import torch


def randn(check, seed, *shape, device="cpu", dtype=torch.float64):
    return torch.randn(*shape, generator=check.random(seed), dtype=dtype).to(device)


def randint(check, seed, *shape, device="cpu", low=-5, high=6):
    return torch.randint(low, high, shape, generator=check.random(seed)).to(device)


def skip_integer_matmul_on_cuda(device):
    """The reference sums channels with tensordot, a matrix product, and CUDA has none for integers
    (pytorch/pytorch#44428): it would raise there, and a correct submission would be marked wrong."""
    if device == "cuda":
        pytest.skip("CUDA has no integer matrix product for the reference to use: this int64 check runs on CPU only")


# --- corr2d -----------------------------------------------------------------------------------

#: (X shape, K shape): 1x1 kernels, kernels as large as X, one-row and one-column kernels, odd sizes.
CORR2D_SHAPES = {
    "one-by-one-kernel": ((4, 5), (1, 1)),
    "kernel-as-large-as-x": ((3, 4), (3, 4)),
    "tall-kernel": ((7, 5), (3, 1)),
    "wide-kernel": ((5, 9), (1, 4)),
    "one-row-input": ((1, 6), (1, 2)),
    "odd-sizes": ((9, 7), (4, 3)),
}


@pytest.mark.target("corr2d")
@pytest.mark.parametrize("case", CORR2D_SHAPES)
def test_matches_conv2d_on_odd_shapes(check, device, case):
    x_shape, k_shape = CORR2D_SHAPES[case]
    check(randn(check, 100, *x_shape, device=device), randn(check, 101, *k_shape, device=device))


@pytest.mark.target("corr2d")
def test_works_on_transposed_and_stepped_inputs(check, device):
    x = randn(check, 102, 8, 12, device=device).t()[1:, ::2]  # (11, 4) with strides (1, 24), offset
    k = randn(check, 103, 3, 4, device=device).t()[::2]  # (2, 3), transposed and stepped
    check(x, k)


@pytest.mark.target("corr2d")
def test_passes_gradients_back_from_non_contiguous_inputs(check, device):
    x = randn(check, 104, 7, 6, device=device).t()
    k = randn(check, 105, 3, 2, device=device).t()
    check(x, k, probe="call_with_grad", options={"wrt": (0, 1)})


@pytest.mark.target("corr2d")
def test_computes_int64_inputs_exactly(check, device):
    check(randint(check, 106, 5, 6, device=device), randint(check, 107, 2, 3, device=device))


@pytest.mark.target("corr2d")
@pytest.mark.parametrize("dtypes", [(torch.float64, torch.float32), (torch.int64, torch.float32),
                                    (torch.float16, torch.float32)],
                         ids=["float64-and-float32", "int64-and-float32", "float16-and-float32"])
def test_promotes_mixed_dtypes(check, device, dtypes):
    x = (randn(check, 108, 4, 5) * 4).to(dtypes[0]).to(device)
    check(x, randn(check, 109, 2, 2, dtype=dtypes[1], device=device))


#: Inputs for which corr2d raises RuntimeError, as F.conv2d(X[None, None], K[None, None]) does
#: (tests/test_conv.py calls F.conv2d on each to hold this table to it).
CORR2D_ERRORS = {
    "x-1d": ((6,), (2, 2)),
    "k-3d": ((4, 4), (1, 2, 2)),
    "empty-kernel": ((4, 4), (2, 0)),
    "kernel-taller-than-x": ((3, 6), (4, 2)),
    "kernel-wider-than-x": ((6, 3), (2, 4)),
}


@pytest.mark.target("corr2d")
@pytest.mark.parametrize("case", CORR2D_ERRORS)
def test_raises_runtime_error_like_conv2d(check, device, case):
    x_shape, k_shape = CORR2D_ERRORS[case]
    check(torch.ones(x_shape, device=device), torch.ones(k_shape, device=device), like="F.conv2d")


# --- corr2d_multi_in --------------------------------------------------------------------------

@pytest.mark.target("corr2d_multi_in")
@pytest.mark.parametrize("channels", [1, 4])
def test_sums_over_channels_with_a_non_square_kernel(check, device, channels):
    check(randn(check, 200 + channels, channels, 6, 5, device=device),
          randn(check, 210 + channels, channels, 3, 2, device=device))


@pytest.mark.target("corr2d_multi_in")
def test_works_on_channels_last_inputs(check, device):
    x = randn(check, 220, 6, 7, 3, device=device).permute(2, 0, 1)  # channels last in memory
    k = randn(check, 221, 2, 3, 4, device=device)[:, :, ::2].transpose(0, 1)  # (3, 2, 2)
    check(x, k)


@pytest.mark.target("corr2d_multi_in")
def test_passes_float64_gradients_back_to_x_and_k(check, device):
    check(randn(check, 222, 3, 5, 6, device=device), randn(check, 223, 3, 2, 3, device=device),
          probe="call_with_grad", options={"wrt": (0, 1)})


@pytest.mark.target("corr2d_multi_in")
def test_sums_int64_channels_exactly(check, device):
    skip_integer_matmul_on_cuda(device)
    check(randint(check, 224, 2, 4, 5, device=device), randint(check, 225, 2, 2, 2, device=device))


#: Inputs for which corr2d_multi_in raises RuntimeError (its docstring says so); the PyTorch op
#: that raises too (F.conv2d(X[None], K[None])), or None where it does not (tests/test_conv.py).
MULTI_IN_ERRORS = {"channel-mismatch": ((3, 4, 4), (2, 2, 2), "F.conv2d"), "x-2d": ((4, 4), (1, 2, 2), None),
                   "no-channels-against-one": ((0, 4, 5), (1, 3, 2), "F.conv2d")}


@pytest.mark.target("corr2d_multi_in")
@pytest.mark.parametrize("case", MULTI_IN_ERRORS)
def test_raises_runtime_error_for_mismatched_channels_or_dims(check, device, case):
    x_shape, k_shape, like = MULTI_IN_ERRORS[case]
    check(torch.ones(x_shape, device=device), torch.ones(k_shape, device=device), like=like)


# --- corr2d_multi_in_out ----------------------------------------------------------------------

@pytest.mark.target("corr2d_multi_in_out")
@pytest.mark.parametrize("channels", [(1, 1), (4, 2), (2, 3)], ids=lambda c: f"{c[0]}-out-{c[1]}-in")
def test_matches_conv2d_for_several_channel_counts(check, device, channels):
    c_out, c_in = channels
    check(randn(check, 300, c_in, 5, 6, device=device), randn(check, 301, c_out, c_in, 2, 3, device=device))


@pytest.mark.target("corr2d_multi_in_out")
def test_works_on_permuted_inputs(check, device):
    x = randn(check, 302, 5, 6, 2, device=device).permute(2, 1, 0)  # (2, 6, 5)
    k = randn(check, 303, 2, 3, 3, 2, device=device).permute(1, 0, 3, 2)  # (3, 2, 2, 3)
    check(x, k)


@pytest.mark.target("corr2d_multi_in_out")
def test_passes_float64_gradients_back_to_every_output_kernel(check, device):
    check(randn(check, 304, 2, 4, 5, device=device), randn(check, 305, 3, 2, 2, 2, device=device),
          probe="call_with_grad", options={"wrt": (0, 1)})


@pytest.mark.target("corr2d_multi_in_out")
def test_computes_int64_output_channels_exactly(check, device):
    skip_integer_matmul_on_cuda(device)
    check(randint(check, 306, 2, 4, 4, device=device), randint(check, 307, 3, 2, 3, 2, device=device))


#: Inputs for which corr2d_multi_in_out raises RuntimeError, as F.conv2d(X, K) does (tests/test_conv.py).
MULTI_IN_OUT_ERRORS = {"channel-mismatch": ((3, 4, 4), (2, 2, 2, 2)), "k-3d": ((2, 4, 4), (2, 2, 2)),
                       "no-channels-against-one": ((0, 5, 6), (1, 1, 2, 3))}


@pytest.mark.target("corr2d_multi_in_out")
@pytest.mark.parametrize("case", MULTI_IN_OUT_ERRORS)
def test_raises_runtime_error_when_k_does_not_match_x(check, device, case):
    x_shape, k_shape = MULTI_IN_OUT_ERRORS[case]
    check(torch.ones(x_shape, device=device), torch.ones(k_shape, device=device), like="F.conv2d")


# --- conv_output_size -------------------------------------------------------------------------

@pytest.mark.target("conv_output_size")
@pytest.mark.parametrize("args", [
    (9, 2, 0, 2), (7, 3, 0, 2), (10, 4, 1, 3), (5, 5, 0, 1), (1, 1, 0, 1), (1, 3, 1, 1), (6, 3, 0, 10),
    (224, 11, 2, 4), (28, 5, 2, 1),
], ids=lambda a: "n{}-k{}-p{}-s{}".format(*a))
def test_floors_the_division(check, args):
    n, kernel, padding, stride = args
    check(n, kernel, padding, stride)


@pytest.mark.target("conv_output_size")
@pytest.mark.parametrize("args", [
    (0, 1, 0, 1), (5, 0, 0, 1), (5, 3, -1, 1), (5, 3, 0, 0), (3, 6, 1, 1), (3, 8, 2, 3),
    (5.0, 3, 0, 1), (5, 3, 0, 1.5), (True, 1, 0, 1),
], ids=["n-0", "kernel-0", "padding-negative", "stride-0", "kernel-too-large", "kernel-too-large-strided",
        "float-n", "float-stride", "bool-n"])
def test_raises_value_error_for_invalid_arguments(check, args):
    check(*args)


# --- pad2d ------------------------------------------------------------------------------------

@pytest.mark.target("pad2d")
@pytest.mark.parametrize("case", ["rows-only", "columns-only", "zero", "3d", "4d-large"])
def test_matches_f_pad_on_leading_dims_and_uneven_pairs(check, device, case):
    shape, padding = {
        "rows-only": ((3, 4), (2, 0)),
        "columns-only": ((3, 4), (0, 3)),
        "zero": ((2, 5), 0),
        "3d": ((2, 3, 4), (1, 2)),
        "4d-large": ((2, 1, 2, 3), 3),
    }[case]
    check(randn(check, 400, *shape, device=device), padding)


@pytest.mark.target("pad2d")
def test_pads_a_transposed_and_stepped_input(check, device):
    check(randn(check, 401, 4, 6, 3, device=device).transpose(0, 2)[:, ::2], (1, 2))


@pytest.mark.target("pad2d")
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool], ids=["int64", "bool"])
def test_keeps_integer_and_bool_dtypes(check, device, dtype):
    check(randint(check, 402, 2, 3, 4, device=device, low=1, high=5).to(dtype), (2, 1))


@pytest.mark.target("pad2d")
def test_passes_float64_gradients_back_from_a_transposed_input(check, device):
    check(randn(check, 403, 2, 3, 4, device=device).transpose(-1, -2), (2, 1), probe="call_with_grad")


#: F.pad(X, (1, 1, 1, 1)) raises RuntimeError for a 1-D X, so both ValueError (the docstring's) and
#: RuntimeError count (tests/test_conv.py calls F.pad to hold this to it). A negative padding is not
#: graded: the docstring asks for a non-negative one, and F.pad would crop.
PAD_ERROR_ACCEPT = ("RuntimeError",)


@pytest.mark.target("pad2d")
def test_raises_value_error_or_runtime_error_for_a_1d_input(check, device):
    check(torch.ones(5, device=device), 1, accept=PAD_ERROR_ACCEPT, like="F.pad")


# --- pool2d -----------------------------------------------------------------------------------

#: (X shape, mode, pool_size, stride, padding): pairs everywhere, strides that do not divide evenly.
POOL_CASES = {
    "max-pairs": ((2, 3, 7, 8), "max", (2, 3), (2, 1), (1, 1)),
    "avg-pairs": ((2, 3, 7, 8), "avg", (3, 2), 2, (1, 0)),
    "max-stride-as-pool": ((3, 7, 9), "max", 3, 3, 1),
    "avg-one-row-window": ((5, 9), "avg", (1, 4), (1, 3), (0, 2)),
    "max-uneven-stride": ((6, 7), "max", 2, (1, 2), 0),
    "avg-window-as-large-as-x": ((4, 3), "avg", (4, 3), 1, 0),
}


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("case", POOL_CASES)
def test_matches_torch_pooling_with_strides_and_padding(check, device, case):
    shape, mode, pool_size, stride, padding = POOL_CASES[case]
    check(randn(check, 500, *shape, device=device), pool_size, mode, kwargs={"stride": stride, "padding": padding})


@pytest.mark.target("pool2d")
def test_max_padding_never_wins_over_negative_values(check, device):
    x = -1 - randn(check, 501, 4, 5, device=device).abs()
    check(x, 3, "max", kwargs={"padding": 1})


@pytest.mark.target("pool2d")
def test_average_divides_border_windows_by_the_full_pool_size(check, device):
    check(torch.ones(4, 5, dtype=torch.float64, device=device), (3, 3), "avg", kwargs={"padding": (1, 1)})


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pools_a_permuted_input(check, device, mode):
    x = randn(check, 502, 6, 8, 2, device=device).permute(2, 1, 0)  # (2, 8, 6)
    check(x, (3, 2), mode, kwargs={"stride": (2, 1), "padding": (1, 0)})


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_keeps_int64_with_padding(check, device, mode):
    check(randint(check, 503, 2, 5, 6, device=device, low=-9, high=10), 3, mode,
          kwargs={"stride": 2, "padding": 1})


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_passes_gradients_back_in_float64_with_padding(check, device, mode):
    check(randn(check, 504, 2, 6, 7, device=device), (3, 2), mode, kwargs={"stride": (2, 1), "padding": (1, 1)},
          probe="call_with_grad")


#: Pooling arguments that must raise: (X shape, pool_size, mode, stride, padding). F.max_pool2d and
#: F.avg_pool2d raise RuntimeError for each (tests/test_conv.py calls them to hold this table to
#: it), so RuntimeError counts as well as the docstring's ValueError.
POOL_ERRORS = {
    "pool-size-0": ((4, 4), 0, "max", 1, 0),
    "stride-0": ((4, 4), 2, "max", 0, 0),
    "negative-padding": ((4, 4), 2, "avg", 1, -1),
    "padding-over-half": ((4, 4), 2, "max", 1, 2),
    "output-below-1": ((2, 2), 3, "max", 1, 0),
    "x-1d": ((4,), 2, "max", 1, 0),
}
POOL_ERROR_ACCEPT = ("RuntimeError",)


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("case", POOL_ERRORS)
def test_raises_value_error_or_runtime_error_for_bad_pooling_arguments(check, device, case):
    shape, pool_size, mode, stride, padding = POOL_ERRORS[case]
    check(torch.ones(shape, device=device), pool_size, mode, kwargs={"stride": stride, "padding": padding},
          accept=POOL_ERROR_ACCEPT, like=f"F.{mode}_pool2d")


@pytest.mark.target("pool2d")
def test_raises_value_error_for_the_mode_mean(check, device):
    check(torch.ones(4, 4, device=device), 2, "mean")


# --- Conv2D -----------------------------------------------------------------------------------

@pytest.mark.target("Conv2D")
@pytest.mark.parametrize("kernel_size", [3, (3, 2)], ids=["int", "tall-pair"])
def test_registers_parameters_of_the_kernel_size(check, kernel_size):
    check(kernel_size, probe="parameters")


@pytest.mark.target("Conv2D")
def test_forward_on_a_non_contiguous_input_with_a_tall_kernel(check, device):
    state = {"weight": randn(check, 600, 3, 2, dtype=torch.float32, device=device),
             "bias": randn(check, 601, 1, dtype=torch.float32, device=device)}
    x = randn(check, 602, 7, 5, dtype=torch.float32, device=device).t()
    check((3, 2), probe="module_forward_on_device", options={"inputs": (x,), "state": state})


def vertical_edges(noise: torch.Tensor, device: str) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """A noisy horizontal band, its vertical edges (corr2d with [[1], [-1]]) and a start far from them."""
    x = torch.zeros(8, 6)
    x[2:5] = 1
    x = (x + 0.5 * noise.float()).to(device)
    state = {"weight": torch.tensor([[-0.4], [0.5]], device=device), "bias": torch.tensor([0.2], device=device)}
    return x, x[:-1] - x[1:], state


VERTICAL_STEPS, VERTICAL_RATE = 30, 0.005


@pytest.mark.target("Conv2D")
def test_learns_a_vertical_edge_kernel_from_another_start(check, device):
    # The reference ends near weight [[0.99], [-0.99]] (tests/test_conv.py holds it to that).
    x, y, state = vertical_edges(randn(check, 603, 8, 6), device)
    check((2, 1), probe="module_sgd_on_device", rtol=1e-3, atol=1e-4,
          options={"inputs": (x,), "labels": y, "state": state, "steps": VERTICAL_STEPS, "lr": VERTICAL_RATE})

