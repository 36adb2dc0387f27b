"""Visible checks for parallel.py: sharding a batch, and data-parallel training on two real ranks.

The ``ddp_*`` probes run the function on both ranks of a two-process group (gloo on the CPU; see
torchgrade/sandbox/probes/parallel.py) and report, rank by rank, what a correct program must leave
behind; the reference's ranks are what one process training on the whole batch would reach.
"""

import pytest
import torch


def batch(check, seed, rows=8, device="cpu", dtype=torch.float64, classes=None):
    """A global batch ``(inputs, labels)``: 4 features; 2 regression targets, or labels of `classes` classes."""
    generator = check.random(seed)
    inputs = torch.randn(rows, 4, generator=generator, dtype=dtype)
    if classes is None:
        labels = torch.randn(rows, 2, generator=generator, dtype=dtype)
    else:
        labels = torch.randint(classes, (rows,), generator=generator)
    return inputs.to(device), labels.to(device)


@pytest.mark.target("shard")
def test_gives_each_rank_its_own_contiguous_block_of_rows(check, device):
    rows = torch.arange(24, device=device).reshape(8, 3)
    for rank in range(2):
        check(rows, rank, 2, probe="view")


@pytest.mark.target("shard")
def test_cuts_the_inputs_and_the_labels_of_a_batch_alike(check, device):
    check(batch(check, 1, rows=6, device=device), 2, 3)


@pytest.mark.target("shard")
def test_raises_value_error_when_the_batch_does_not_split_evenly(check, device):
    check(torch.zeros(5, 3, device=device), 0, 2)


@pytest.mark.target("broadcast_parameters")
def test_every_rank_ends_with_rank_0s_parameters_and_buffers(check, device):
    check("tiny_net", probe="ddp_broadcast", options={"device": device, "seed": 1}, exact=True)


@pytest.mark.target("average_gradients")
def test_every_rank_ends_with_the_mean_of_the_ranks_gradients(check, device):
    check("tiny_net_with_spare", probe="ddp_average", options={"device": device, "seed": 2})


@pytest.mark.target("ddp_train_step")
def test_every_rank_ends_where_one_process_training_on_the_whole_batch_ends(check, device):
    check("tiny_net", batch(check, 3, device=device), "mse", "sgd", probe="ddp_train",
          options={"device": device, "steps": 3, "report": "parameters"})


@pytest.mark.target("ddp_train_step")
def test_returns_the_mean_loss_of_the_whole_batch_on_every_rank(check, device):
    check("linear", batch(check, 4, device=device, classes=2), "cross_entropy", "sgd", probe="ddp_train",
          options={"device": device, "steps": 1, "report": "losses"})


@pytest.mark.target("wrap_ddp")
def test_returns_a_distributed_data_parallel_that_keeps_the_ranks_in_step(check, device):
    args = ("tiny_net",) if device == "cpu" else ("tiny_net", device)
    check(*args, probe="ddp_wrap", options={"device": device, "batch": batch(check, 5, device=device)})


# --- what each stub's docstring promises, one claim per check --------------------------------------

@pytest.mark.target("shard")
def test_keeps_a_list_batch_a_list(check, device):
    inputs, labels = batch(check, 6, rows=6, device=device)
    check([inputs, labels], 1, 3)


#: (batch shape, rank, world_size) that shard refuses with ValueError.
SHARD_ARGUMENT_ERRORS = {
    "rank-equal-to-world-size": ((4, 3), 2, 2),
    "negative-rank": ((4, 3), -1, 2),
    "world-size-0": ((4, 3), 0, 0),
    "a-0-dim-tensor": ((), 0, 1),
}


@pytest.mark.target("shard")
@pytest.mark.parametrize("case", SHARD_ARGUMENT_ERRORS)
def test_raises_value_error_for_a_rank_world_size_or_tensor_it_cannot_shard(check, device, case):
    shape, rank, world_size = SHARD_ARGUMENT_ERRORS[case]
    check(torch.zeros(shape, device=device), rank, world_size)


@pytest.mark.target("shard")
def test_raises_type_error_for_an_item_that_is_not_a_tensor(check, device):
    check((torch.zeros(4, 3, device=device), "labels"), 0, 2)


@pytest.mark.target("broadcast_parameters")
def test_every_rank_ends_with_the_src_ranks_parameters_a_strided_one_included(check, device):
    # strided_net's head.weight is w[:, ::2] of a wider tensor (not contiguous); rank 1 is the source
    check("strided_net", kwargs={"src": 1}, probe="ddp_broadcast", options={"device": device, "seed": 3}, exact=True)


@pytest.mark.target("average_gradients")
def test_averages_a_gradient_that_is_not_contiguous(check, device):
    # strided_net's head.weight and its .grad are strided views (every other column of a wider tensor)
    check("strided_net", probe="ddp_average", options={"device": device, "seed": 9})


@pytest.mark.target("shard")
def test_keeps_a_named_tuple_batch_that_named_tuple(check, device):
    # the batch is passed as Batch(inputs, labels), a collections.namedtuple
    check(batch(check, 10, rows=6, device=device), 1, 2, probe="named_batch")


@pytest.mark.target("ddp_train_step")
def test_raises_value_error_when_the_global_batch_does_not_split_evenly(check, device):
    check("linear", batch(check, 7, rows=5, device=device), "mse", "sgd", probe="ddp_train",
          options={"device": device, "steps": 1})


@pytest.mark.target("wrap_ddp")
def test_moves_the_model_to_the_device_it_is_given_first(check, device):
    check("tiny_net", device, probe="ddp_wrap", options={"device": device, "batch": batch(check, 8, device=device)})


@pytest.mark.target("shard")
def test_returns_the_whole_batch_for_a_world_of_one(check, device):
    check(torch.arange(6.0, device=device).reshape(3, 2), 0, 1, probe="view")
