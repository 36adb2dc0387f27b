"""Visible checks for conv.py: the notes' examples, gradients, dtypes, errors and a layer that learns."""

import pytest
import torch


def randn(check, seed, *shape, device="cpu", dtype=torch.float32):
    return torch.randn(*shape, generator=check.random(seed), dtype=dtype).to(device)


def notes_x(device, channels=1):
    """The notes' 3x3 input (and its second channel, the same plus one)."""
    x = torch.arange(9.0, device=device).reshape(3, 3)
    return torch.stack([x + c for c in range(channels)]) if channels > 1 else x


def notes_k(device):
    return torch.tensor([[[0.0, 1.0], [2.0, 3.0]], [[1.0, 2.0], [3.0, 4.0]]], device=device)


@pytest.mark.target("corr2d")
def test_matches_the_notes_example(check, device):
    check(notes_x(device), notes_k(device)[0])


@pytest.mark.target("corr2d")
def test_matches_conv2d_with_a_non_square_kernel(check, device):
    check(randn(check, 1, 5, 7, device=device), randn(check, 2, 2, 3, device=device))


@pytest.mark.target("corr2d")
def test_keeps_float64_inputs_in_float64(check, device):
    check(randn(check, 3, 4, 6, device=device, dtype=torch.float64),
          randn(check, 4, 3, 2, device=device, dtype=torch.float64))


@pytest.mark.target("corr2d")
def test_passes_gradients_back_to_x_and_k(check, device):
    check(randn(check, 5, 5, 6, device=device), randn(check, 6, 2, 3, device=device), probe="call_with_grad",
          options={"wrt": (0, 1)})


@pytest.mark.target("corr2d")
def test_raises_runtime_error_when_the_kernel_is_larger_than_x(check, device):
    check(torch.ones(2, 3, device=device), torch.ones(3, 3, device=device), like="F.conv2d")


@pytest.mark.target("corr2d_multi_in")
def test_sums_the_notes_example_over_two_channels(check, device):
    check(notes_x(device, channels=2), notes_k(device))


@pytest.mark.target("corr2d_multi_in")
def test_passes_gradients_back_to_x_and_the_channel_kernels(check, device):
    check(randn(check, 10, 3, 5, 6, device=device), randn(check, 11, 3, 2, 3, device=device),
          probe="call_with_grad", options={"wrt": (0, 1)})


@pytest.mark.target("corr2d_multi_in_out")
def test_matches_the_notes_example_with_three_output_channels(check, device):
    k = notes_k(device)
    check(notes_x(device, channels=2), torch.stack((k, k + 1, k + 2), 0))


@pytest.mark.target("corr2d_multi_in_out")
def test_passes_gradients_back_to_x_and_every_output_kernel(check, device):
    check(randn(check, 20, 2, 5, 4, device=device), randn(check, 21, 3, 2, 3, 2, device=device),
          probe="call_with_grad", options={"wrt": (0, 1)})


@pytest.mark.target("conv_output_size")
def test_matches_the_notes_examples(check):
    check(8, 3, kwargs={"padding": 1})
    check(8, 5, kwargs={"padding": 2})
    check(8, 3, kwargs={"stride": 3})
    check(8, 5, kwargs={"padding": 1, "stride": 4})


@pytest.mark.target("conv_output_size")
def test_raises_value_error_when_the_kernel_does_not_fit(check):
    check(2, 3)


@pytest.mark.target("pad2d")
def test_pads_one_row_and_column_of_zeros_on_every_side(check, device):
    check(torch.ones(2, 3, device=device), 1)


@pytest.mark.target("pad2d")
def test_pads_rows_and_columns_by_a_pair(check, device):
    check(randn(check, 30, 3, 4, device=device), (2, 1))


@pytest.mark.target("pad2d")
def test_takes_the_pair_as_a_list_as_f_pad_does(check, device):
    check(randn(check, 33, 3, 4, device=device), [2, 1])


@pytest.mark.target("pad2d")
def test_passes_gradients_back_to_the_unpadded_input(check, device):
    check(randn(check, 31, 3, 4, device=device), (1, 2), probe="call_with_grad")


@pytest.mark.target("pool2d")
def test_max_pools_the_notes_example(check, device):
    check(torch.tensor([[0.0, 1.0, 2.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], device=device), (2, 2))


@pytest.mark.target("pool2d")
def test_takes_a_pool_size_as_a_list_as_f_max_pool2d_does(check, device):
    check(randn(check, 44, 4, 5, device=device), [2, 3])


@pytest.mark.target("pool2d")
def test_average_pools_the_notes_example(check, device):
    check(torch.tensor([[0.0, 1.0, 2.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], device=device), (2, 2), "avg")


@pytest.mark.target("pool2d")
def test_max_pools_with_padding_and_stride(check, device):
    check(randn(check, 40, 5, 7, device=device), 3, kwargs={"padding": 1, "stride": 2})


@pytest.mark.target("pool2d")
def test_average_counts_the_padding_zeros(check, device):
    check(torch.ones(4, 5, device=device) + randn(check, 41, 4, 5, device=device), 3, "avg", kwargs={"padding": 1})


@pytest.mark.target("pool2d")
def test_raises_value_error_for_another_mode(check, device):
    check(torch.ones(3, 3, device=device), 2, "min")


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_passes_gradients_back_through_each_window(check, device, mode):
    check(randn(check, 42, 2, 5, 6, device=device), (2, 3), mode, kwargs={"stride": (2, 1)},
          probe="call_with_grad")


def horizontal_edges(device: str) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The notes' X (ones, columns 2:6 zero), its edges Y = corr2d(X, [[1, -1]]), and a fixed start."""
    x = torch.ones(6, 8, device=device)
    x[:, 2:6] = 0
    state = {"weight": torch.tensor([[0.3, 0.2]], device=device), "bias": torch.tensor([0.1], device=device)}
    return x, x[:, :-1] - x[:, 1:], state


#: The notes' lr=0.03 diverges here: unlike nn.Conv2d(bias=False) there, the bias gradient sums 42 errors.
LEARNING_STEPS, LEARNING_RATE = 30, 0.012


@pytest.mark.target("Conv2D")
def test_registers_weight_and_bias_as_parameters(check):
    check((1, 2), probe="parameters")


@pytest.mark.target("Conv2D")
def test_forward_is_corr2d_plus_bias(check, device):
    state = {"weight": randn(check, 50, 2, 3, device=device), "bias": randn(check, 51, 1, device=device)}
    check((2, 3), probe="module_forward_on_device",
          options={"inputs": (randn(check, 52, 5, 6, device=device),), "state": state})


@pytest.mark.target("Conv2D")
def test_learns_the_edge_detection_kernel_by_gradient_descent(check, device):
    # The reference ends near weight [[0.99, -0.99]], bias 0 (tests/test_conv.py holds it to that).
    x, y, state = horizontal_edges(device)
    check((1, 2), probe="module_sgd_on_device", rtol=1e-3, atol=1e-4,
          options={"inputs": (x,), "labels": y, "state": state, "steps": LEARNING_STEPS, "lr": LEARNING_RATE})


# --- what each stub's docstring promises, one claim per check --------------------------------------
# Error inputs sit in tables that tests/test_fairness.py also feeds to F.conv2d / F.pad / pooling, so
# "as F.conv2d does" is said only where it does, and the types it raises are accepted.

#: (X shape, K shape) for which corr2d raises RuntimeError, as F.conv2d(X[None, None], K[None, None]) does.
CORR2D_SHAPE_ERRORS = {"x-3d": ((1, 4, 4), (2, 2)), "empty-kernel": ((4, 4), (0, 2)),
                       "kernel-of-width-0": ((4, 4), (2, 0))}


@pytest.mark.target("corr2d")
def test_accepts_a_1x1_kernel_and_a_kernel_as_large_as_x(check, device):
    check(randn(check, 9, 3, 4, device=device), randn(check, 10, 1, 1, device=device))
    check(randn(check, 9, 3, 4, device=device), randn(check, 11, 3, 4, device=device))


@pytest.mark.target("corr2d")
def test_promotes_float32_and_float64_to_float64(check, device):
    check(randn(check, 7, 4, 5, device=device, dtype=torch.float64), randn(check, 8, 2, 2, device=device))


@pytest.mark.target("corr2d")
@pytest.mark.parametrize("case", CORR2D_SHAPE_ERRORS)
def test_raises_runtime_error_for_a_non_2d_input_or_an_empty_kernel(check, device, case):
    x_shape, k_shape = CORR2D_SHAPE_ERRORS[case]
    check(torch.ones(x_shape, device=device), torch.ones(k_shape, device=device), like="F.conv2d")


#: (X shape, K shape) for which corr2d_multi_in raises RuntimeError, as F.conv2d(X[None], K[None]) does.
MULTI_IN_SHAPE_ERRORS = {
    "channel-counts-differ": ((2, 4, 4), (3, 2, 2)),
    "kernel-larger-than-x": ((2, 3, 3), (2, 4, 4)),
    "k-2d": ((2, 4, 4), (2, 2)),
    "x-2d": ((2, 4), (2, 2, 2)),
    "empty-kernel": ((2, 4, 4), (2, 0, 2)),
    "kernel-of-width-0": ((2, 4, 4), (2, 2, 0)),
    "kernel-taller-than-x": ((2, 3, 4), (2, 4, 2)),
    "kernel-wider-than-x": ((2, 4, 3), (2, 2, 4)),
}


@pytest.mark.target("corr2d_multi_in")
def test_sums_channels_with_a_1x1_kernel_and_with_a_kernel_as_large_as_x(check, device):
    check(randn(check, 14, 2, 3, 4, device=device), randn(check, 15, 2, 1, 1, device=device))
    check(randn(check, 14, 2, 3, 4, device=device), randn(check, 16, 2, 3, 4, device=device))


@pytest.mark.target("corr2d_multi_in")
def test_promotes_mixed_float32_and_float64_to_float64(check, device):
    check(randn(check, 17, 2, 4, 5, device=device), randn(check, 18, 2, 2, 2, device=device, dtype=torch.float64))
    check(randn(check, 17, 2, 4, 5, device=device, dtype=torch.float64), randn(check, 18, 2, 2, 2, device=device))


@pytest.mark.target("corr2d_multi_in")
def test_keeps_float64_and_sums_a_single_channel(check, device):
    check(randn(check, 12, 1, 4, 5, device=device, dtype=torch.float64),
          randn(check, 13, 1, 3, 2, device=device, dtype=torch.float64))


@pytest.mark.target("corr2d_multi_in")
@pytest.mark.parametrize("case", MULTI_IN_SHAPE_ERRORS)
def test_raises_runtime_error_for_shapes_that_do_not_match(check, device, case):
    x_shape, k_shape = MULTI_IN_SHAPE_ERRORS[case]
    check(torch.ones(x_shape, device=device), torch.ones(k_shape, device=device), like="F.conv2d")


#: (X shape, K shape) for which corr2d_multi_in_out raises RuntimeError, as F.conv2d(X, K) does.
MULTI_IN_OUT_SHAPE_ERRORS = {
    "channel-counts-differ": ((2, 4, 4), (3, 3, 2, 2)),
    "x-2d": ((4, 4), (1, 1, 2, 2)),
    "k-3d": ((2, 4, 4), (2, 2, 2)),
    "empty-kernel": ((2, 4, 4), (3, 2, 0, 2)),
    "kernel-larger-than-x": ((2, 3, 3), (1, 2, 4, 4)),
    "kernel-of-width-0": ((2, 4, 4), (3, 2, 2, 0)),
    "kernel-taller-than-x": ((2, 3, 4), (1, 2, 4, 2)),
    "kernel-wider-than-x": ((2, 4, 3), (1, 2, 2, 4)),
    "x-2d-with-as-many-rows-as-k-has-channels": ((2, 4), (1, 2, 2, 2)),
}


@pytest.mark.target("corr2d_multi_in_out")
def test_maps_channels_with_1x1_kernels_and_with_kernels_as_large_as_x(check, device):
    check(randn(check, 24, 2, 3, 4, device=device), randn(check, 25, 3, 2, 1, 1, device=device))
    check(randn(check, 24, 2, 3, 4, device=device), randn(check, 26, 2, 2, 3, 4, device=device))


@pytest.mark.target("corr2d_multi_in_out")
def test_promotes_mixed_float64_and_float32_to_float64(check, device):
    check(randn(check, 27, 2, 4, 5, device=device, dtype=torch.float64), randn(check, 28, 3, 2, 2, 2, device=device))
    check(randn(check, 27, 2, 4, 5, device=device), randn(check, 28, 3, 2, 2, 2, device=device, dtype=torch.float64))


@pytest.mark.target("corr2d_multi_in_out")
def test_keeps_float64_for_one_output_channel(check, device):
    check(randn(check, 22, 2, 4, 5, device=device, dtype=torch.float64),
          randn(check, 23, 1, 2, 2, 3, device=device, dtype=torch.float64))


@pytest.mark.target("corr2d_multi_in_out")
@pytest.mark.parametrize("case", MULTI_IN_OUT_SHAPE_ERRORS)
def test_raises_runtime_error_when_the_kernels_do_not_fit_x(check, device, case):
    x_shape, k_shape = MULTI_IN_OUT_SHAPE_ERRORS[case]
    check(torch.ones(x_shape, device=device), torch.ones(k_shape, device=device), like="F.conv2d")


@pytest.mark.target("conv_output_size")
def test_uses_no_padding_and_stride_1_by_default(check):
    check(8, 3)
    check(5, 5)
    check(5, 1)
    check(1, 1)


@pytest.mark.target("conv_output_size")
def test_drops_positions_that_do_not_fill_a_window(check):
    check(10, 3, 1, 4)
    check(7, 2, kwargs={"stride": 2})


@pytest.mark.target("conv_output_size")
@pytest.mark.parametrize("args", [(0, 1, 1, 1), (5, 0, 0, 1), (5, 3, -1, 1), (5, 3, 0, 0), (5.0, 3, 0, 1),
                                  (5, True, 0, 1), (5, 3, 0.5, 1)],
                         ids=["n-0", "kernel-0", "padding-negative", "stride-0", "float-n", "bool-kernel",
                              "float-padding"])
def test_raises_value_error_for_an_invalid_argument(check, args):
    check(*args)


@pytest.mark.target("pad2d")
def test_pads_only_the_last_two_dims_and_keeps_the_dtype(check, device):
    check(torch.arange(24, device=device).reshape(2, 3, 4), (1, 2))


@pytest.mark.target("pad2d")
def test_returns_a_new_tensor_for_zero_padding(check, device):
    check(randn(check, 32, 2, 3, device=device), 0)


#: F.pad raises RuntimeError for these, so RuntimeError counts as well as the docstring's ValueError.
PAD_SHAPE_ERROR_ACCEPT = ("RuntimeError",)


@pytest.mark.target("pad2d")
@pytest.mark.parametrize("shape", [(5,), (), (0,)], ids=["1d", "0d", "1d-empty"])
def test_refuses_an_input_with_fewer_than_2_dims(check, device, shape):
    check(torch.ones(shape, device=device), 1, accept=PAD_SHAPE_ERROR_ACCEPT, like="F.pad")


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pools_every_channel_of_a_batch(check, device, mode):
    check(randn(check, 43, 2, 3, 5, 6, device=device), (2, 3), mode, kwargs={"stride": (1, 2), "padding": (1, 0)})


@pytest.mark.target("pool2d")
def test_max_gives_the_gradient_to_the_first_of_equal_maxima(check, device):
    x = torch.tensor([[1.0, 3.0, 3.0], [3.0, 2.0, 3.0], [0.0, 3.0, 1.0]], device=device)
    check(x, 2, probe="call_with_grad")


@pytest.mark.target("pool2d")
def test_max_padding_never_wins_over_negative_integers(check, device):
    check(torch.tensor([[-5, -3, -7], [-2, -9, -4]], device=device), 3, kwargs={"padding": 1})


@pytest.mark.target("pool2d")
def test_max_lets_a_nan_win(check, device):
    x = torch.tensor([[1.0, float("nan"), 2.0], [3.0, 0.0, 5.0]], device=device)
    check(x, 2)


@pytest.mark.target("pool2d")
def test_average_truncates_int64_as_avg_pool2d_does(check, device):
    check(torch.tensor([[7, 3, -4], [2, 8, 1]], device=device), 2, "avg")
    check(torch.tensor([[7, 3, -4], [2, 8, 1]], device=device), (2, 3), "avg")


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_accepts_a_pool_size_of_1_and_padding_of_half_the_pool_size(check, device, mode):
    check(randn(check, 44, 3, 4, device=device), 1, mode)
    check(randn(check, 45, 5, 7, device=device), (2, 4), mode, kwargs={"padding": (1, 2)})


#: Pooling arguments that must raise: (X shape, pool_size, mode, stride, padding, types accepted besides the
#: docstring's ValueError). What F.max_pool2d / F.avg_pool2d raise for each counts as well: RuntimeError, and
#: TypeError for a size that is not an int (tests/test_fairness.py calls them on this table).
POOL_ARGUMENT_ERRORS = {
    "pool-size-0": ((4, 4), 0, "avg", 1, 0, ("RuntimeError",)),
    "stride-0": ((4, 4), 2, "max", 0, 0, ("RuntimeError",)),
    "a-pair-with-a-stride-0": ((4, 4), 2, "avg", (1, 0), 0, ("RuntimeError",)),
    "negative-stride": ((4, 4), 2, "max", -1, 0, ("RuntimeError",)),
    "negative-padding": ((4, 4), 2, "max", 1, -1, ("RuntimeError",)),
    "padding-over-half": ((4, 4), 3, "avg", 1, 2, ("RuntimeError",)),
    "padding-over-half-in-rows": ((5, 5), 3, "max", 1, (2, 0), ("RuntimeError",)),
    "padding-over-half-in-columns": ((5, 5), 3, "avg", 1, (0, 2), ("RuntimeError",)),
    "output-below-1": ((2, 3), 3, "avg", 1, 0, ("RuntimeError",)),
    "output-width-below-1": ((3, 2), (1, 3), "max", 1, 0, ("RuntimeError",)),
    "x-1d": ((4,), 2, "max", 1, 0, ("RuntimeError",)),
    "a-float-size": ((4, 4), 2.5, "max", 1, 0, ("RuntimeError", "TypeError")),
    "a-triple": ((4, 4), (2, 2, 2), "max", 1, 0, ("RuntimeError",)),
}


@pytest.mark.target("pool2d")
@pytest.mark.parametrize("case", POOL_ARGUMENT_ERRORS)
def test_raises_for_invalid_pooling_arguments(check, device, case):
    shape, pool_size, mode, stride, padding, accept = POOL_ARGUMENT_ERRORS[case]
    check(torch.ones(shape, device=device), pool_size, mode, kwargs={"stride": stride, "padding": padding},
          accept=accept, like=f"F.{mode}_pool2d")


@pytest.mark.target("Conv2D")
def test_reads_an_int_kernel_size_as_a_square(check):
    check(2, probe="parameters")
