"""Hidden checks for training.py: other seeds, optimizers with state, MLPs, DataLoaders, odd batch sizes,
zero epochs."""

import pytest
import torch

from graders.checks.visible.test_training import (STEP_FACTS, classes, hint, linear_state, mlp_state, separable,
                                                  stale_grads)


@pytest.mark.target("set_seed")
def test_different_seeds_draw_different_numbers(check, device):
    with hint("set_seed must use its argument: set_seed(7) and set_seed(8) start every generator differently."):
        check(7, probe="seeding", options={"device": device, "other": 8})


@pytest.mark.target("set_seed")
@pytest.mark.parametrize("seed", [0, 2**31 - 1])
def test_repeats_for_the_smallest_and_a_large_seed(check, device, seed):
    with hint(f"set_seed({seed}) seeds Python's random, NumPy and torch like any other seed."):
        check(seed, probe="seeding", options={"device": device})


OPTIMIZERS = {
    "momentum-sgd-cross-entropy": (("SGD", {"lr": 0.1, "momentum": 0.9}), "CrossEntropyLoss"),
    "adam-mse": (("Adam", {"lr": 0.05}), "MSELoss"),
}


@pytest.mark.target("train_step")
@pytest.mark.parametrize("case", OPTIMIZERS)
def test_trains_an_mlp_over_several_steps_with_an_optimizer_that_keeps_state(check, device, case):
    optimizer, loss = OPTIMIZERS[case]
    g = check.random(40 + list(OPTIMIZERS).index(case))
    state = mlp_state(g, 4, 5, 3, device)
    x, y = classes(g, 6, 4, 3, device)
    if loss == "MSELoss":
        y = torch.randn(6, 3, generator=g, dtype=torch.float64).to(device)
    with hint(f"three train_step calls on one batch with an MLP, {optimizer[0]} {optimizer[1]} and {loss}, old "
              "gradients on the parameters at the start: each step clears the gradients, runs forward, loss, "
              "backward and optimizer.step(), and returns the loss before its update."):
        check("mlp", (x, y), loss, optimizer, probe="training_steps",
              options={"state": state, "steps": 3, "stale": stale_grads(g, state),
                       "keep": ("returned losses",) + STEP_FACTS})


@pytest.mark.target("train_step")
def test_accepts_the_batch_as_a_list_as_a_dataloader_yields_it(check, device):
    g = check.random(42)
    state, (x, y) = linear_state(g, 3, 2, device), classes(g, 5, 3, 2, device)
    with hint("a DataLoader yields [inputs, targets] as a list: unpack the batch (inputs, targets = batch)."):
        check("linear", [x, y], "CrossEntropyLoss", ("SGD", {"lr": 0.3}), probe="training_steps",
              options={"state": state, "keep": ("returned losses",) + STEP_FACTS})


EVALUATION_LOADERS = {
    "dataloader-batches-of-5": {"loader": "ordered", "batch_size": 5},
    "batches-of-one": {"loader": "list", "batch_size": 1},
    "one-batch": {"loader": "list", "batch_size": 23},
}


@pytest.mark.target("evaluate")
@pytest.mark.parametrize("case", EVALUATION_LOADERS)
def test_counts_every_sample_once_whatever_the_batches(check, device, case):
    g = check.random(50 + list(EVALUATION_LOADERS).index(case))
    state, data = mlp_state(g, 4, 6, 3, device), classes(g, 23, 4, 3, device)
    with hint("accuracy is (number of samples whose argmax over dim 1 equals the target) / (number of samples), "
              "counted over the whole loader, whatever its batches."):
        check("mlp", data, probe="evaluation", options={"state": state, **EVALUATION_LOADERS[case],
                                                         "keep": ("accuracy",)})


@pytest.mark.target("evaluate")
@pytest.mark.parametrize("right", [True, False], ids=["all-right", "all-wrong"])
def test_gives_exactly_one_or_zero(check, device, right):
    g = check.random(53)
    state = linear_state(g, 2, 3, device)
    x = torch.randn(7, 2, generator=g, dtype=torch.float64).to(device)
    predicted = (x @ state["weight"].T + state["bias"]).argmax(dim=1)
    with hint("accuracy is a fraction in [0, 1]: 1.0 when every prediction is right, 0.0 when none is."):
        check("linear", (x, predicted if right else (predicted + 1) % 3), probe="evaluation",
              options={"state": state, "batch_size": 3, "keep": ("accuracy",)})


@pytest.mark.target("fit")
def test_zero_epochs_give_an_empty_history(check, device):
    g = check.random(60)
    state, data = linear_state(g, 2, 2, device), separable(g, 8, device)
    with hint("fit returns one record per epoch: none for epochs=0."):
        check("linear", data, data, 0, 0.5, probe="fitting", options={"state": state, "keep": ("history",)})


@pytest.mark.target("fit")
def test_trains_in_training_mode_and_evaluates_in_eval_mode_every_epoch(check, device):
    g = check.random(61)
    state, train, val = mlp_state(g, 2, 4, 2, device), separable(g, 16, device), separable(g, 8, device)
    with hint("each epoch trains (model.train(), with autograd) and then evaluates (model.eval(), under "
              "torch.no_grad()); after evaluating, the next epoch must switch back to training mode."):
        check("mlp", train, val, 3, 0.2, probe="fitting",
              options={"state": state, "keep": ("every forward pass with autograd on ran in training mode",
                                                "every forward pass without autograd ran in eval mode")})


@pytest.mark.target("fit")
def test_records_the_history_of_an_mlp_read_from_a_dataloader(check, device):
    g = check.random(62)
    state, train, val = mlp_state(g, 2, 6, 2, device), separable(g, 24, device), separable(g, 10, device)
    with hint("the same loop with an MLP, training batches of 8 from a DataLoader (in order) and validation "
              "batches of 8 and 2: epochs numbered from 1, train_loss the mean of the epoch's batch losses, "
              "val_accuracy from evaluate."):
        check("mlp", train, val, 4, 0.1, probe="fitting", options={"state": state, "loader": "ordered",
                                                                   "keep": ("history",)})
