"""Visible checks for tensors.py: what every correct view, broadcast, scatter and gather must do."""

import pytest
import torch


def randn(check, seed, *shape, device="cpu", dtype=torch.float32):
    return torch.randn(*shape, generator=check.random(seed), dtype=dtype).to(device)


@pytest.mark.target("view")
def test_matches_tensor_view_on_a_contiguous_input(check, device):
    check(torch.arange(24.0, device=device), 4, 6, probe="view")


@pytest.mark.target("view")
def test_infers_the_dimension_given_as_minus_one(check, device):
    check(randn(check, 1, 2, 3, 4, device=device), -1, 4, probe="view")


@pytest.mark.target("view")
def test_raises_runtime_error_when_the_sizes_do_not_match(check, device):
    check(torch.zeros(6, device=device), 4, 2, like="Tensor.view")


@pytest.mark.target("broadcast_shape")
def test_matches_torch_broadcast_shapes(check):
    check((3, 1), (1, 4))
    check((5, 1, 3), (4, 1))


@pytest.mark.target("broadcast_shape")
def test_raises_runtime_error_for_incompatible_shapes(check):
    check((3, 2), (4, 2), like="torch.broadcast_shapes")


@pytest.mark.target("broadcast_to")
def test_shares_storage_with_stride_zero_on_broadcast_dims(check, device):
    check(randn(check, 2, 3, 1, device=device), (3, 4), probe="view", options={"write": False})


@pytest.mark.target("broadcast_to")
def test_adds_leading_dimensions(check, device):
    check(randn(check, 3, 4, device=device), (2, 4), probe="view", options={"write": False})


@pytest.mark.target("scatter_")
def test_writes_src_in_place_along_dim_0_as_in_the_notes(check, device):
    src = torch.arange(1, 11, device=device).reshape(2, 5)
    index = torch.tensor([[0, 1, 2, 0, 0]], device=device)
    check(torch.zeros(3, 5, dtype=src.dtype, device=device), 0, index, src, probe="inplace")


@pytest.mark.target("scatter_")
def test_writes_a_python_number_along_dim_1(check, device):
    index = torch.tensor([[2], [3]], device=device)
    check(torch.zeros(2, 4, device=device), 1, index, 1.23, probe="inplace")


@pytest.mark.target("scatter_add_")
def test_accumulates_repeated_indices(check, device):
    index = torch.tensor([[0, 1, 2, 0, 0]], device=device)
    check(torch.zeros(3, 5, device=device), 0, index, torch.ones(2, 5, device=device), probe="inplace")


@pytest.mark.target("gather")
def test_matches_torch_gather_along_dim_1(check, device):
    x = torch.tensor([[1, 2], [3, 4]], device=device)
    check(x, 1, torch.tensor([[0, 0], [1, 0]], device=device))


@pytest.mark.target("gather")
def test_passes_gradients_back_to_x(check, device):
    index = torch.tensor([[0, 2, 1], [1, 1, 0]], device=device)
    check(randn(check, 3, 2, 3, device=device), 1, index, probe="call_with_grad")


@pytest.mark.target("one_hot")
def test_encodes_labels_as_int64_rows(check, device):
    check(torch.tensor([0, 2, 1, 2], device=device), 3, exact=True)
