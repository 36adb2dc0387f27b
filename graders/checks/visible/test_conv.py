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
def test_passes_gradients_back_to_the_unpadded_input(check, device):
    check(randn(check, 31, 3, 4, device=device), (1, 2), probe="call_with_grad")


@pytest.mark.target("pool2d")
def test_max_pools_the_notes_example(check, device):
    check(torch.tensor([[0.0, 1.0, 2.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], device=device), (2, 2))


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
