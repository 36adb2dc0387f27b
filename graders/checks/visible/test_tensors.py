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
    index = torch.tensor([[0, 1, 2, 0, 0], [0, 1, 0, 0, 2]], device=device)  # columns 0, 1, 3: one row twice
    check(torch.zeros(3, 5, device=device), 0, index, torch.arange(1.0, 11.0, device=device).reshape(2, 5),
          probe="inplace")


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


# --- what each stub's docstring promises, one claim per check --------------------------------------
# Error inputs sit in tables that tests/test_fairness.py also feeds to the PyTorch op, so the types
# accepted are worked out from PyTorch: (build on a device -> args, types accepted besides the
# reference's). `like` names the op only where it raises too.

VIEW_ERRORS = {
    "two-minus-ones": (lambda d: (torch.arange(24.0, device=d), -1, 2, -1), ()),
    "negative-size": (lambda d: (torch.arange(24.0, device=d), -2, -12), ()),
    "minus-one-with-no-elements": (lambda d: (torch.zeros(0, 3, device=d), -1, 0), ()),
    "minus-one-beside-a-zero-size": (lambda d: (torch.arange(6.0, device=d), -1, 0), ()),
    "a-dim-spanning-two-chunks": (lambda d: (torch.arange(6, device=d).reshape(2, 3).t(), 6), ()),
    "an-expanded-input-flattened": (lambda d: (torch.arange(3.0, device=d).reshape(3, 1).expand(3, 4), 12), ()),
    "minus-one-where-the-other-sizes-do-not-divide-numel": (lambda d: (torch.arange(6.0, device=d), 4, -1), ()),
    # a 0-dim x has one element, which 4 does not divide: RuntimeError, not an empty view of shape (4, 0)
    "minus-one-beside-a-size-larger-than-a-0-dim-x": (lambda d: (torch.tensor(5.0, device=d), 4, -1), ()),
}


@pytest.mark.target("view")
def test_flattens_everything_given_minus_one_alone(check, device):
    check(randn(check, 3, 2, 3, 4, device=device), -1, probe="view")


@pytest.mark.target("view")
def test_accepts_the_shape_as_one_tuple(check, device):
    check(torch.arange(24.0, device=device), (2, 12), probe="view")


@pytest.mark.target("view")
def test_follows_the_strides_of_a_transposed_input_as_in_the_docstring(check, device):
    check(torch.arange(6, device=device).reshape(2, 3).t(), 3, 1, 2, probe="view")


@pytest.mark.target("view")
def test_matches_tensor_view_on_sliced_and_expanded_inputs(check, device):
    base = torch.arange(24.0, device=device)
    check(base.reshape(4, 6)[:, ::2], 2, 2, 3, 1, probe="view")  # strides (6, 2): one chunk per dim
    check(base.reshape(4, 6)[1:3], 3, 2, 2, probe="view")  # offset 6, contiguous
    check(base.reshape(2, 3, 4)[:, 1:], 2, 8, probe="view")  # (2, 2, 4): the last two dims one chunk
    check(base[:3].reshape(3, 1).expand(3, 4), 3, 2, 2, probe="view")  # stride 0 on the expanded dim


@pytest.mark.target("view")
def test_gives_size_one_dims_the_strides_tensor_view_does(check, device):
    base = torch.arange(24.0, device=device)
    check(base.reshape(4, 6)[:, :1].t(), 1, 4, probe="view")  # shape (1, 4), strides (1, 6)
    check(base[:9].reshape(3, 3)[1:2, 1:2], 1, 1, probe="view")  # shape (1, 1), strides (3, 1)
    check(base.reshape(1, 24, 1).transpose(0, 2), 4, 6, probe="view")  # shape (1, 24, 1), strides (24, 1, 1)


@pytest.mark.target("view")
def test_gives_strides_of_one_for_a_zero_dim_input(check, device):
    check(torch.tensor(3.0, device=device), 1, 1, probe="view")


@pytest.mark.target("view")
def test_gives_contiguous_strides_for_an_input_with_no_elements(check, device):
    check(torch.zeros(4, 6, device=device)[:, :0], 2, 0, 3, probe="view")


@pytest.mark.target("view")
def test_keeps_the_strides_of_an_input_with_no_elements_for_the_same_shape(check, device):
    check(torch.zeros(4, 6, device=device)[:, :0], 4, 0, probe="view")


@pytest.mark.target("view")
@pytest.mark.parametrize("case", VIEW_ERRORS)
def test_raises_runtime_error_for_an_invalid_shape(check, device, case):
    build, accept = VIEW_ERRORS[case]
    check(*build(device), probe="view", accept=accept, like="Tensor.view")


@pytest.mark.target("view")
@pytest.mark.parametrize("shape", [(), (2.0, 12), ((2, 3), 4)], ids=["no-shape", "a-float-size", "a-shape-and-a-size"])
def test_raises_type_error_without_an_int_shape(check, device, shape):
    check(torch.arange(24.0, device=device), *shape, probe="view", like="Tensor.view")


@pytest.mark.target("view")
def test_passes_gradients_back_to_x_through_the_view(check, device):
    check(randn(check, 4, 6, 4, device=device), 2, 3, 4, probe="call_with_grad")


BROADCAST_SHAPE_ERRORS = {
    "an-entry-that-is-not-a-shape": ((2.5,), ()),
    # what torch.broadcast_shapes raises: ValueError in torch 2.13, RuntimeError in 2.7 (the oldest allowed)
    "a-negative-size": (((1,), (-1,)), ("RuntimeError",)),
}


@pytest.mark.target("broadcast_shape")
def test_reads_an_int_as_a_one_dim_shape_and_skips_none(check):
    check(3, None, (2, 1))


@pytest.mark.target("broadcast_shape")
def test_returns_an_empty_tuple_for_no_shapes(check):
    check()


@pytest.mark.target("broadcast_shape")
def test_keeps_sizes_that_agree(check):
    check((2, 3), (4, 2, 3))


@pytest.mark.target("broadcast_shape")
def test_broadcasts_a_zero_size_like_any_other(check):
    check((0,), (1,))
    check((2, 1), (1, 0))


@pytest.mark.target("broadcast_shape")
@pytest.mark.parametrize("case", BROADCAST_SHAPE_ERRORS)
def test_raises_for_an_invalid_entry_as_torch_does(check, case):
    shapes, accept = BROADCAST_SHAPE_ERRORS[case]
    check(*shapes, accept=accept, like="torch.broadcast_shapes")


BROADCAST_TO_ERRORS = {
    "fewer-dims": (lambda d: (torch.zeros(3, 4, device=d), (4,)), ()),
    "a-non-1-size-changed": (lambda d: (torch.zeros(3, 1, device=d), (2, 4)), ()),
    "minus-one-in-a-new-leading-dim": (lambda d: (torch.zeros(3, device=d), (-1, 3)), ()),
    "a-negative-size": (lambda d: (torch.zeros(3, 1, device=d), (3, -2)), ()),
}


@pytest.mark.target("broadcast_to")
def test_keeps_a_size_given_as_minus_one(check, device):
    check(randn(check, 5, 3, 1, device=device), (-1, 4), probe="view", options={"write": False})


@pytest.mark.target("broadcast_to")
def test_broadcasts_a_size_one_dim_or_a_new_dim_to_zero(check, device):
    check(randn(check, 6, 3, 1, device=device), (3, 0), probe="view", options={"write": False})
    check(randn(check, 6, 3, device=device), (0, 3), probe="view", options={"write": False})


@pytest.mark.target("broadcast_to")
def test_gives_a_zero_dim_input_stride_zero_everywhere(check, device):
    check(torch.tensor(2.0, device=device), (1, 2, 3), probe="view", options={"write": False})
    check(torch.tensor(2.0, device=device), (3, 1), probe="view", options={"write": False})


@pytest.mark.target("broadcast_to")
def test_gives_a_new_size_one_leading_dim_the_stride_aten_does(check, device):
    check(torch.arange(3, device=device), (2, 1, 3), probe="view", options={"write": False})


@pytest.mark.target("broadcast_to")
@pytest.mark.parametrize("case", BROADCAST_TO_ERRORS)
def test_raises_runtime_error_for_a_shape_it_cannot_broadcast_to(check, device, case):
    build, accept = BROADCAST_TO_ERRORS[case]
    check(*build(device), probe="view", options={"write": False}, accept=accept, like="torch.broadcast_to")


@pytest.mark.target("broadcast_to")
def test_passes_gradients_back_summed_over_broadcast_dims(check, device):
    check(randn(check, 7, 3, 1, device=device), (2, 3, 4), probe="call_with_grad")


# (build on a device -> (target, dim, index, src), types accepted besides the reference's); the
# inplace probe also compares the target after the error: it must be unchanged.
SCATTER_ERRORS = {
    "dim-out-of-range": (lambda d: (torch.zeros(3, device=d), 1, torch.tensor([0], device=d),
                                    torch.ones(3, device=d)), ()),
    "negative-dim-out-of-range": (lambda d: (torch.zeros(3, device=d), -2, torch.tensor([0], device=d),
                                             torch.ones(3, device=d)), ()),
    "float-index": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.tensor([[0.0]], device=d),
                               torch.ones(3, 4, device=d)), ()),
    "index-of-another-rank": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.tensor([0], device=d),
                                         torch.ones(3, 4, device=d)), ()),
    "src-of-another-rank": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.tensor([[0]], device=d),
                                       torch.ones(1, 1, 1, device=d)), ()),
    "src-of-another-dtype": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.tensor([[0]], device=d),
                                        torch.ones(3, 4, dtype=torch.float64, device=d)), ()),
    "a-0-dim-src-against-a-2-d-index": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.tensor([[0]], device=d),
                                                  torch.arange(3.0, device=d)[2]), ()),
    "src-of-another-dtype-and-an-empty-index": (lambda d: (torch.zeros(3, 4, device=d), 0,
                                                           torch.zeros(0, dtype=torch.long, device=d),
                                                           torch.ones(3, dtype=torch.float64, device=d)), ()),
    "index-larger-than-target": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.zeros(1, 5, dtype=torch.long, device=d),
                                            torch.ones(3, 5, device=d)), ()),
    "index-larger-than-src": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.zeros(2, 3, dtype=torch.long, device=d),
                                         torch.ones(1, 3, device=d)), ()),
    "index-larger-than-a-0-dim-src": (lambda d: (torch.zeros(3, device=d), 0, torch.tensor([0, 1], device=d),
                                                 torch.tensor(5.0, device=d)), ()),
    "index-larger-than-target-and-src-of-lower-rank": (
        lambda d: (torch.zeros(3, 4, device=d), 0, torch.zeros(1, 5, dtype=torch.long, device=d),
                   torch.ones(5, device=d)), ()),
    # the index is larger than src along dim 0 and src has a lower rank: RuntimeError (not an IndexError from
    # looking at a dim of src that is not there)
    "index-larger-than-a-src-of-lower-rank": (
        lambda d: (torch.zeros(3, 4, device=d), 1, torch.zeros(2, 1, dtype=torch.long, device=d),
                   torch.ones(1, device=d)), ()),
    "index-out-of-range": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.tensor([[1, 3]], device=d),
                                      torch.ones(3, 4, device=d)), ("IndexError",)),
    "negative-index": (lambda d: (torch.zeros(3, 4, device=d), 0, torch.tensor([[1, -1]], device=d),
                                  torch.ones(3, 4, device=d)), ("IndexError",)),
}


@pytest.mark.target("scatter_")
def test_writes_along_a_negative_dim(check, device):
    index = torch.tensor([[2, 0], [1, 3]], device=device)
    check(torch.zeros(2, 4, device=device), -1, index, torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=device),
          probe="inplace")
    check(torch.zeros(3, 2, device=device), -2, index.t() % 3, torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=device),
          probe="inplace")


@pytest.mark.target("scatter_")
def test_counts_a_zero_dim_tensor_as_one_dim(check, device):
    check(torch.zeros(3, device=device), 0, torch.tensor(2, device=device), torch.tensor(5.0, device=device),
          probe="inplace")
    check(torch.tensor(1.0, device=device), 0, torch.tensor(0, device=device), torch.tensor(5.0, device=device),
          probe="inplace")


@pytest.mark.target("scatter_")
def test_accepts_an_int32_index(check, device):
    index = torch.tensor([[1, 0, 2]], dtype=torch.int32, device=device)
    check(torch.zeros(3, 3, device=device), 0, index, torch.ones(1, 3, device=device), probe="inplace")


@pytest.mark.target("scatter_")
def test_writes_nothing_for_an_empty_index(check, device):
    index = torch.zeros(0, dtype=torch.long, device=device)
    check(torch.ones(3, 4, device=device), 0, index, torch.ones(3, device=device), probe="inplace")
    check(torch.ones(3, 4, device=device), 0, index.float(), torch.ones(3, device=device), probe="inplace")


@pytest.mark.target("scatter_")
def test_uses_only_the_leading_block_of_a_larger_src(check, device):
    src = torch.arange(20.0, device=device).reshape(4, 5)
    check(torch.zeros(3, 3, device=device), 0, torch.tensor([[2, 0], [1, 2]], device=device), src, probe="inplace")


@pytest.mark.target("scatter_")
@pytest.mark.parametrize("case", SCATTER_ERRORS)
def test_raises_and_leaves_target_unchanged_for_invalid_arguments(check, device, case):
    build, accept = SCATTER_ERRORS[case]
    check(*build(device), probe="inplace", accept=accept, like="Tensor.scatter_")


@pytest.mark.target("scatter_")
def test_passes_gradients_back_to_src(check, device):
    index = torch.tensor([[0, 2], [1, 0]], device=device)
    check(torch.zeros(3, 2, device=device), 0, index, randn(check, 8, 2, 2, device=device),
          probe="call_with_grad", options={"wrt": (3,)})


@pytest.mark.target("scatter_add_")
def test_adds_values_whose_index_repeats_a_position_as_in_the_docstring(check, device):
    index = torch.tensor([1, 1, 1], device=device)
    check(torch.zeros(3, device=device), 0, index, torch.tensor([5.0, 6.0, 7.0], device=device), probe="inplace")


@pytest.mark.target("scatter_add_")
def test_adds_along_dim_1_into_a_non_zero_target(check, device):
    index = torch.tensor([[0, 0], [2, 1]], device=device)
    check(torch.ones(2, 3, device=device), 1, index, torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=device),
          probe="inplace")


@pytest.mark.target("scatter_add_")
def test_adds_along_a_negative_dim(check, device):
    check(torch.zeros(4, device=device), -1, torch.tensor([3, 0, 3], device=device),
          torch.tensor([1.0, 2.0, 4.0], device=device), probe="inplace")


@pytest.mark.target("scatter_add_")
def test_adds_into_zero_dim_tensors_counted_as_one_dim(check, device):
    check(torch.ones(3, device=device), 0, torch.tensor(1, device=device), torch.tensor(5.0, device=device),
          probe="inplace")
    check(torch.tensor(1.0, device=device), 0, torch.tensor(0, device=device), torch.tensor(5.0, device=device),
          probe="inplace")


@pytest.mark.target("scatter_add_")
def test_adds_nothing_for_an_empty_index(check, device):
    index = torch.zeros(0, dtype=torch.long, device=device)
    check(torch.ones(3, 4, device=device), 1, index, torch.ones(3, device=device), probe="inplace")
    check(torch.ones(3, 4, device=device), 1, index.float(), torch.ones(3, device=device), probe="inplace")


@pytest.mark.target("scatter_add_")
def test_raises_type_error_for_a_python_number_src(check, device):
    check(torch.zeros(3, device=device), 0, torch.tensor([0], device=device), 1.0, probe="inplace",
          like="Tensor.scatter_add_")


@pytest.mark.target("scatter_add_")
@pytest.mark.parametrize("case", SCATTER_ERRORS)
def test_validates_before_adding_and_leaves_target_unchanged(check, device, case):
    build, accept = SCATTER_ERRORS[case]
    check(*build(device), probe="inplace", accept=accept, like="Tensor.scatter_add_")


@pytest.mark.target("scatter_add_")
def test_passes_gradients_back_to_the_added_src(check, device):
    index = torch.tensor([[0, 2], [0, 0]], device=device)
    check(torch.zeros(3, 2, device=device), 0, index, randn(check, 9, 2, 2, device=device),
          probe="call_with_grad", options={"wrt": (3,)})


GATHER_ERRORS = {
    "dim-out-of-range": (lambda d: (torch.zeros(2, device=d), 1, torch.tensor([0], device=d)), ()),
    "negative-dim-out-of-range": (lambda d: (torch.zeros(2, device=d), -2, torch.tensor([0], device=d)), ()),
    "float-index": (lambda d: (torch.zeros(2, 2, device=d), 1, torch.tensor([[0.0]], device=d)), ()),
    "index-of-another-rank": (lambda d: (torch.zeros(2, 2, device=d), 1, torch.tensor([0], device=d)), ()),
    "index-larger-than-x": (lambda d: (torch.zeros(2, 2, device=d), 1, torch.zeros(3, 1, dtype=torch.long, device=d)),
                            ()),
    "index-out-of-range": (lambda d: (torch.zeros(2, 2, device=d), 0, torch.tensor([[0, 2]], device=d)),
                           ("IndexError",)),
    "negative-index": (lambda d: (torch.zeros(2, 2, device=d), 1, torch.tensor([[0, -1]], device=d)),
                       ("IndexError",)),
}


@pytest.mark.target("gather")
def test_matches_torch_gather_along_a_negative_dim_with_repeats(check, device):
    x = torch.arange(12.0, device=device).reshape(3, 4)
    check(x, -1, torch.tensor([[0, 0, 3], [1, 0, 1], [3, 3, 2]], device=device))
    check(x, -2, torch.tensor([[2, 0, 2, 1], [2, 2, 0, 0]], device=device))


@pytest.mark.target("gather")
def test_reads_zero_dim_tensors_counted_as_one_dim(check, device):
    check(torch.tensor(5.0, device=device), 0, torch.tensor(0, device=device))
    check(torch.arange(3.0, device=device), 0, torch.tensor(2, device=device))
    check(torch.tensor(5.0, device=device), 0, torch.tensor([0, 0], device=device))


@pytest.mark.target("gather")
def test_reads_with_an_int32_index(check, device):
    x = torch.arange(4.0, device=device).reshape(2, 2)
    check(x, 1, torch.tensor([[1, 1, 0]], dtype=torch.int32, device=device))


@pytest.mark.target("gather")
def test_gives_an_empty_result_of_the_index_shape_for_an_empty_index(check, device):
    check(torch.zeros(2, 2, device=device), 1, torch.zeros(0, 5, dtype=torch.long, device=device))
    check(torch.zeros(2, 2, device=device), 1, torch.zeros(3, 0, dtype=torch.long, device=device))
    check(torch.zeros(2, 2, device=device), 1, torch.zeros(0, 2, device=device))


@pytest.mark.target("gather")
@pytest.mark.parametrize("case", GATHER_ERRORS)
def test_raises_for_invalid_arguments(check, device, case):
    build, accept = GATHER_ERRORS[case]
    check(*build(device), accept=accept, like="torch.gather")


ONE_HOT_ERRORS = {
    "labels-not-int64": (lambda d: (torch.tensor([0, 2], dtype=torch.int32, device=d), 3), ()),
    "empty-labels-with-no-class-count": (lambda d: (torch.zeros(0, dtype=torch.long, device=d), -1), ()),
    "empty-labels-with-zero-classes": (lambda d: (torch.zeros(0, dtype=torch.long, device=d), 0), ()),
    "a-negative-label": (lambda d: (torch.tensor([-1, 0], device=d), 3), ()),
    "a-label-not-below-num-classes": (lambda d: (torch.tensor([0, 2], device=d), 2), ()),
}


@pytest.mark.target("one_hot")
def test_infers_the_number_of_classes_from_minus_one_as_in_the_docstring(check, device):
    check(torch.tensor([0, 2, 1], device=device), -1, exact=True)


@pytest.mark.target("one_hot")
def test_gives_an_empty_result_for_empty_labels(check, device):
    check(torch.zeros(2, 0, dtype=torch.long, device=device), 4, exact=True)
    check(torch.zeros(0, dtype=torch.long, device=device), 1, exact=True)


@pytest.mark.target("one_hot")
def test_encodes_a_zero_dim_label_as_one_row(check, device):
    check(torch.tensor(2, device=device), 4, exact=True)


@pytest.mark.target("one_hot")
@pytest.mark.parametrize("case", ONE_HOT_ERRORS)
def test_raises_runtime_error_for_invalid_labels(check, device, case):
    build, accept = ONE_HOT_ERRORS[case]
    check(*build(device), accept=accept, like="F.one_hot")
