"""Hidden checks for parallel.py: other world sizes and containers, another source rank, BatchNorm
buffers, frozen and unused parameters, other losses and optimizers, float32, uneven batches."""

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
def test_cuts_a_list_batch_into_four_blocks(check, device):
    inputs, labels = batch(check, 11, rows=12, device=device)
    for rank in range(4):
        check([inputs, labels], rank, 4)


@pytest.mark.target("shard")
def test_gives_the_whole_batch_to_a_single_rank(check, device):
    check(torch.arange(12.0, device=device).reshape(4, 3), 0, 1, probe="view")


@pytest.mark.target("shard")
def test_keeps_the_strides_of_a_non_contiguous_batch(check, device):
    rows = torch.arange(24.0, device=device).reshape(3, 8).t()
    check(rows, 1, 2, probe="view")


@pytest.mark.target("shard")
@pytest.mark.parametrize("case", ["one-item-does-not-split", "rank-out-of-range"])
def test_raises_value_error(check, device, case):
    if case == "one-item-does-not-split":
        check((torch.zeros(8, 3, device=device), torch.zeros(6, device=device)), 0, 4)
    else:
        check(torch.zeros(8, 3, device=device), 2, 2)


@pytest.mark.target("broadcast_parameters")
def test_copies_from_the_source_rank_it_is_given(check, device):
    check("tiny_net", kwargs={"src": 1}, probe="ddp_broadcast", options={"device": device, "seed": 12}, exact=True)


@pytest.mark.target("broadcast_parameters")
def test_copies_batchnorm_statistics_and_the_integer_batch_counter(check, device):
    check("batchnorm_net", probe="ddp_broadcast", options={"device": device, "seed": 13}, exact=True)


@pytest.mark.target("average_gradients")
def test_averages_the_gradients_of_a_batchnorm_model(check, device):
    check("batchnorm_net", probe="ddp_average", options={"device": device, "seed": 14})


@pytest.mark.target("ddp_train_step")
def test_leaves_a_frozen_parameter_and_an_unused_one_alone_under_momentum_and_weight_decay(check, device):
    check("tiny_net_with_spare", batch(check, 15, device=device), "mse", "sgd_momentum", probe="ddp_train",
          options={"device": device, "steps": 3, "report": "parameters"})


@pytest.mark.target("ddp_train_step")
def test_puts_a_model_left_in_eval_mode_in_training_mode(check, device):
    # (its parameters and BatchNorm's running statistics after the steps: the returned loss is another check's)
    # Every rank's rows hold each of five rows as often, however shard cuts the batch (contiguous or strided,
    # two ranks or four): BatchNorm's statistics, a rank's own, then do not depend on shard (graded by its checks).
    inputs, labels = batch(check, 20, rows=5, device=device)
    check("batchnorm_net_in_eval_mode", (inputs.repeat(4, 1), labels.repeat(4, 1)), "mse", "sgd", probe="ddp_train",
          options={"device": device, "steps": 2, "report": "parameters"})


@pytest.mark.target("ddp_train_step")
def test_trains_in_float32_with_adam(check, device):
    check("tiny_net", batch(check, 16, device=device, dtype=torch.float32), "mse", "adam", probe="ddp_train",
          options={"device": device, "steps": 3, "lr": 0.01, "report": "parameters"})


@pytest.mark.target("ddp_train_step")
def test_takes_a_list_batch_as_a_data_loader_yields_it(check, device):
    check("tiny_net", list(batch(check, 17, rows=4, device=device, classes=2)), "cross_entropy", "sgd",
          probe="ddp_train", options={"device": device, "steps": 2, "report": "parameters"})


@pytest.mark.target("ddp_train_step")
def test_raises_value_error_on_every_rank_when_the_batch_does_not_split_evenly(check, device):
    check("linear", batch(check, 18, rows=7, device=device), "mse", "sgd", probe="ddp_train",
          options={"device": device, "steps": 1})


@pytest.mark.target("wrap_ddp")
def test_moves_a_batchnorm_model_to_the_device_it_is_given(check, device):
    check("batchnorm_net", torch.device(device), probe="ddp_wrap",
          options={"device": device, "batch": batch(check, 19, device=device), "steps": 3})
