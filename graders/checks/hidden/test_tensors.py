"""Hidden checks for tensors.py: edge cases (non-contiguous inputs, negative dims, odd shapes, dtypes)."""

import pytest
import torch


def randn(check, seed, *shape, device="cpu", dtype=torch.float32):
    return torch.randn(*shape, generator=check.random(seed), dtype=dtype).to(device)


# (description, builder of x, shape). The builders make inputs that are not plain contiguous tensors.
VIEW_CASES = {
    "transposed-compatible": (lambda x: x.reshape(2, 3, 4).transpose(0, 1), (3, 1, 2, 4)),
    "transposed-incompatible": (lambda x: x.reshape(6, 4).t(), (24,)),
    "sliced-with-steps": (lambda x: x.reshape(4, 6)[:, ::2], (4, 3, 1)),
    "sliced-split-a-chunk": (lambda x: x.reshape(4, 6)[1:3], (2, 2, 3)),
    "storage-offset": (lambda x: x[5:17], (3, 4)),
    "expanded": (lambda x: x[:3].reshape(3, 1).expand(3, 4), (3, 2, 2)),
    "expanded-incompatible": (lambda x: x[:3].reshape(3, 1).expand(3, 4), (12,)),
    "two-minus-ones": (lambda x: x, (-1, 2, -1)),
    "shape-as-a-tuple": (lambda x: x, ((2, 12),)),
    "zero-dim": (lambda x: x[0], (1, 1)),
    "zero-size": (lambda x: x[:0].reshape(0, 3), (3, 0, 1)),
    "size-one-dims": (lambda x: x.reshape(1, 24, 1).transpose(0, 2), (4, 6)),
    # found by the audit's search (marks said no input tells these mutants apart): a size-1 dim's stride is
    # any number; an empty tensor over a non-empty storage
    "size-one-dim-of-an-odd-stride": (lambda x: x.reshape(2, 12).as_strided((2, 1, 12), (12, 7, 1)), (24,)),
    "empty-slice-to-a-nonzero-size": (lambda x: x[:0], (3,)),
    "empty-with-two-minus-ones": (lambda x: x[:0].reshape(0, 3), (-1, -1)),
    "empty-with-a-negative-size": (lambda x: x[:0].reshape(0, 3, 4), (-1, -2)),
}


@pytest.mark.target("view")
@pytest.mark.parametrize("case", VIEW_CASES)
def test_matches_tensor_view_on_unusual_inputs(check, device, case):
    build, shape = VIEW_CASES[case]
    x = build(torch.arange(24.0, dtype=torch.float64, device=device))
    check(x, *shape, probe="view", like="Tensor.view")


@pytest.mark.target("view")
def test_passes_gradients_back_through_a_non_contiguous_view(check, device):
    x = randn(check, 11, 4, 6, device=device).t()[1:]
    check(x, 5, 2, 2, probe="call_with_grad")


@pytest.mark.target("view")
def test_raises_type_error_for_a_float_size(check, device):
    # (a float -1 is not an int either: `x.view(-1.0, 3)` raises TypeError, it is not inferred)
    check(torch.arange(6.0, device=device), -1.0, 3, probe="view", like="Tensor.view")


@pytest.mark.target("view")
def test_keeps_integer_dtypes(check, device):
    check(torch.arange(12, dtype=torch.int16, device=device), 2, -1, probe="view")


@pytest.mark.target("broadcast_shape")
@pytest.mark.parametrize("shapes", [
    [(), (3,)], [(0,), (1,)], [(2, 1, 1), (1, 3, 1), (1, 1, 4)], [(1,), (7, 0, 1)], [(4, 3)], [],
], ids=["scalar", "zero-size", "three-shapes", "zero-size-middle", "one-shape", "no-shapes"])
def test_matches_torch_on_edge_shapes(check, shapes):
    check(*shapes)


@pytest.mark.target("broadcast_shape")
def test_raises_when_a_zero_size_meets_another_size(check):
    check((0,), (3,), like="torch.broadcast_shapes")


@pytest.mark.target("broadcast_to")
@pytest.mark.parametrize("case", ["transposed", "offset", "same-shape", "scalar", "incompatible", "fewer-dims"])
def test_matches_torch_broadcast_to_on_unusual_inputs(check, device, case):
    base = torch.arange(12.0, device=device)
    x, shape = {
        "transposed": (base.reshape(3, 4).t()[:, :1], (2, 4, 3)),
        "offset": (base[3:6].reshape(3, 1), (3, 5)),
        "same-shape": (base.reshape(3, 4), (3, 4)),
        "scalar": (base[4], (2, 2)),
        "incompatible": (base.reshape(3, 4), (3, 5)),
        "fewer-dims": (base.reshape(3, 4), (4,)),
    }[case]
    check(x, shape, probe="view", options={"write": False}, like="torch.broadcast_to")


@pytest.mark.target("broadcast_to")
def test_sums_gradients_over_broadcast_dimensions(check, device):
    check(randn(check, 12, 3, 1, device=device), (2, 3, 5), probe="call_with_grad")


@pytest.mark.target("scatter_")
@pytest.mark.parametrize("dim", [-1, -2, 0, 2])
def test_matches_torch_in_3d_with_any_dim(check, device, dim):
    rand = check.random(20 + dim)
    target = torch.randn(3, 4, 5, generator=rand, dtype=torch.float64)
    size = list(target.shape)
    size[dim] = 2
    # distinct indices along `dim` (torch's result is undefined for repeats)
    index = torch.rand(*size[:dim % 3], target.shape[dim], *size[dim % 3 + 1:], generator=rand).argsort(dim % 3)
    index = index.narrow(dim % 3, 0, 2)
    src = torch.randn(3, 4, 5, generator=rand, dtype=torch.float64)
    check(target.to(device), dim, index.to(device), src.to(device), probe="inplace")


@pytest.mark.target("scatter_")
def test_leaves_target_unchanged_and_raises_for_an_out_of_range_index(check, device):
    index = torch.tensor([[0, 1], [3, 0]], device=device)
    check(torch.zeros(3, 2, device=device), 0, index, torch.ones(2, 2, device=device), probe="inplace",
          accept=("IndexError",), like="Tensor.scatter_")


@pytest.mark.target("scatter_")
def test_writes_int_src_into_an_int_target(check, device):
    index = torch.tensor([[1, 0, 2]], device=device)
    check(torch.zeros(3, 3, dtype=torch.int64, device=device), 0, index, torch.tensor([[7, 8, 9]], device=device),
          probe="inplace")


@pytest.mark.target("scatter_")
def test_index_smaller_than_src(check, device):
    src = torch.arange(20.0, device=device).reshape(4, 5)
    check(torch.zeros(4, 4, device=device), 1, torch.tensor([[3, 0], [1, 2]], device=device), src, probe="inplace")


@pytest.mark.target("scatter_add_")
@pytest.mark.parametrize("dim", [-1, 1])
def test_accumulates_in_3d_with_negative_dims(check, device, dim):
    rand = check.random(30)
    index = torch.randint(0, 4, (2, 3, 4), generator=rand)
    src = torch.randn(2, 3, 4, generator=rand, dtype=torch.float64)
    target = torch.zeros(2, 4, 4, dtype=torch.float64) if dim == 1 else torch.zeros(2, 3, 4, dtype=torch.float64)
    check(target.to(device), dim, index.to(device), src.to(device), probe="inplace")


@pytest.mark.target("scatter_add_")
def test_accumulates_into_a_non_zero_int_target(check, device):
    index = torch.tensor([0, 0, 2, 2, 2], device=device)
    check(torch.full((3,), 5, device=device), 0, index, torch.arange(5, device=device), probe="inplace")


@pytest.mark.target("scatter_add_")
def test_raises_for_an_out_of_range_index_in_place(check, device):
    check(torch.zeros(3, device=device), 0, torch.tensor([0, 3], device=device), torch.ones(2, device=device),
          probe="inplace", accept=("IndexError",), like="Tensor.scatter_add_")


@pytest.mark.target("gather")
@pytest.mark.parametrize("dim", [0, -1, -3])
def test_matches_torch_in_3d(check, device, dim):
    rand = check.random(40)
    x = torch.randn(3, 4, 5, generator=rand, dtype=torch.float64)
    index = torch.randint(0, x.shape[dim], (2, 3, 4), generator=rand)
    check(x.to(device), dim, index.to(device))


@pytest.mark.target("gather")
def test_works_on_a_non_contiguous_input(check, device):
    x = torch.arange(20.0, device=device).reshape(4, 5).t()
    check(x, 0, torch.tensor([[3, 0], [1, 1]], device=device))


@pytest.mark.target("gather")
def test_raises_for_an_out_of_range_index(check, device):
    check(torch.zeros(2, 2, device=device), 1, torch.tensor([[0, 2]], device=device), accept=("IndexError",),
          like="torch.gather")


@pytest.mark.target("scatter_")
def test_raises_runtime_error_when_index_is_larger_than_target_along_dim_0(check, device):
    # along dim 1 the index is in range; along dim 0 it has 3 rows where target has 2 (torch: RuntimeError)
    check(torch.zeros(2, 3, device=device), 1, torch.zeros(3, 1, dtype=torch.long, device=device),
          torch.ones(3, 3, device=device), probe="inplace", like="Tensor.scatter_")


@pytest.mark.target("scatter_add_")
def test_raises_runtime_error_in_place_when_index_is_larger_than_target_along_dim_0(check, device):
    check(torch.zeros(2, 3, device=device), 1, torch.zeros(3, 1, dtype=torch.long, device=device),
          torch.ones(3, 3, device=device), probe="inplace", like="Tensor.scatter_add_")


@pytest.mark.target("gather")
def test_raises_runtime_error_when_index_is_larger_than_x_along_the_last_dim(check, device):
    # gathering along dim 0, the index has 4 columns where x has 3 (torch: RuntimeError)
    check(torch.arange(6.0, device=device).reshape(2, 3), 0, torch.zeros(2, 4, dtype=torch.long, device=device),
          like="torch.gather")


@pytest.mark.target("one_hot")
def test_leaves_the_labels_unchanged(check, device):
    check(torch.tensor([2, 0, 1], device=device), 3, probe="inplace")


@pytest.mark.target("one_hot")
def test_infers_the_number_of_classes_when_given_minus_one(check, device):
    check(torch.tensor([3, 0, 1], device=device), -1)


@pytest.mark.target("one_hot")
def test_keeps_the_shape_of_2d_labels(check, device):
    check(torch.tensor([[0, 1], [4, 2]], device=device), 5)

