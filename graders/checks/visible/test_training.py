"""Visible checks for training.py: seeding, one training step, evaluation, and a training loop that learns.

Models, losses and optimizers are named from the public tables in ``torchgrade/sandbox/probes/training.py``
(``'linear'`` is an ``nn.Linear`` with the weights the check sends, in float64); a loader is a list of
``(inputs, targets)`` batches cut from the data shown, in order, unless a check says otherwise.
"""

import contextlib

import pytest
import torch

from torchgrade.engine.differential import CheckFailed


@contextlib.contextmanager
def hint(text):
    """On a plain failure, add what the contract asks (and what the input was) to the message."""
    try:
        yield
    except CheckFailed as e:
        if type(e) is not CheckFailed or "not implemented yet" in str(e):  # a forbidden call keeps its type
            raise
        raise CheckFailed(f"{e}\nhint: {text}") from None


def linear_state(g, n_in, n_out, device):
    """Weights for the probe's 'linear' model (nn.Linear(n_in, n_out)), float64."""
    return {"weight": torch.randn(n_out, n_in, generator=g, dtype=torch.float64).to(device),
            "bias": torch.randn(n_out, generator=g, dtype=torch.float64).to(device)}


def mlp_state(g, n_in, hidden, n_out, device):
    """Weights for the probe's 'mlp' model (Linear, ReLU, Linear), float64."""
    return {"0.weight": torch.randn(hidden, n_in, generator=g, dtype=torch.float64).to(device),
            "0.bias": torch.randn(hidden, generator=g, dtype=torch.float64).to(device),
            "2.weight": torch.randn(n_out, hidden, generator=g, dtype=torch.float64).to(device),
            "2.bias": torch.randn(n_out, generator=g, dtype=torch.float64).to(device)}


def classes(g, n, n_in, n_classes, device):
    """(inputs, targets): n float64 samples and int64 labels below n_classes."""
    return (torch.randn(n, n_in, generator=g, dtype=torch.float64).to(device),
            torch.randint(0, n_classes, (n,), generator=g).to(device))


def separable(g, n, device):
    """(inputs, targets): 2-D points labelled by the side of a line they lie on, at least 0.3 away from it."""
    x = torch.randn(n, 2, generator=g, dtype=torch.float64)
    side = (x[:, 0] - 0.5 * x[:, 1] > 0).long()
    x[:, 0] += torch.where(side == 1, 0.3, -0.3).to(torch.float64)
    return x.to(device), side.to(device)


def stale_grads(g, state):
    """Gradients an earlier step would have left on the parameters."""
    return {k: torch.randn(v.shape, generator=g, dtype=v.dtype).to(v.device) for k, v in state.items()}


@pytest.mark.target("set_seed")
def test_makes_random_numpy_and_torch_repeat(check, device):
    with hint("set_seed(s) seeds Python's random (random.seed), NumPy (numpy.random.seed) and torch "
              "(torch.manual_seed, which also seeds every CUDA device): after it, each draws the same numbers."):
        check(1234, probe="seeding", options={"device": device})


SGD = ("SGD", {"lr": 0.5})
STEP_FACTS = ("parameters changed by the first step", "parameters after each step")


@pytest.mark.target("train_step")
def test_returns_the_loss_before_the_update_as_a_python_float(check, device):
    g = check.random(1)
    state, batch = linear_state(g, 3, 3, device), classes(g, 8, 3, 3, device)
    with hint("train_step returns loss.item(): a Python float (not a tensor that keeps the graph alive), the loss "
              "of the batch before optimizer.step() changes the weights. Two steps on the same batch were run."):
        check("linear", batch, "CrossEntropyLoss", SGD, probe="training_steps",
              options={"state": state, "steps": 2, "keep": ("type of the returned loss", "returned losses")})


@pytest.mark.target("train_step")
def test_updates_the_parameters_with_one_optimizer_step(check, device):
    g = check.random(2)
    state, batch = linear_state(g, 3, 3, device), classes(g, 8, 3, 3, device)
    with hint("after loss.backward(), optimizer.step() applies the gradients; clearing them between backward "
              "and step (or never calling step) leaves the parameters unchanged."):
        check("linear", batch, "CrossEntropyLoss", SGD, probe="training_steps",
              options={"state": state, "keep": STEP_FACTS})


@pytest.mark.target("train_step")
def test_clears_old_gradients_before_backward(check, device):
    g = check.random(3)
    state, batch = linear_state(g, 3, 3, device), classes(g, 8, 3, 3, device)
    with hint("the parameters already held .grad values (as after an earlier step); gradients accumulate, so "
              "train_step calls optimizer.zero_grad() before loss.backward(), or the step uses old + new gradients."):
        check("linear", batch, "CrossEntropyLoss", SGD, probe="training_steps",
              options={"state": state, "stale": stale_grads(g, state), "keep": STEP_FACTS})


@pytest.mark.target("train_step")
def test_runs_the_forward_pass_in_training_mode(check, device):
    g = check.random(4)
    state, batch = linear_state(g, 3, 3, device), classes(g, 8, 3, 3, device)
    with hint("the model came in evaluation mode; train_step calls model.train() first (dropout and batch norm "
              "behave differently while training)."):
        check("linear", batch, "CrossEntropyLoss", SGD, probe="training_steps",
              options={"state": state, "keep": ("model.training during forward",)})


def uneven_batches(g, device):
    """10 samples read in batches of 4, 4, 2 that the 'linear' model gets 4, 2 and 0 right: accuracy 6/10,
    while the mean of the per-batch accuracies would be (1 + 0.5 + 0) / 3 = 0.5."""
    state = linear_state(g, 3, 3, device)
    x = torch.randn(10, 3, generator=g, dtype=torch.float64).to(device)
    predicted = (x @ state["weight"].T + state["bias"]).argmax(dim=1)
    right = torch.tensor([1, 1, 1, 1, 1, 1, 0, 0, 0, 0], dtype=torch.bool, device=device)
    return state, (x, torch.where(right, predicted, (predicted + 1) % 3))


@pytest.mark.target("evaluate")
def test_counts_correct_predictions_over_all_samples(check, device):
    state, data = uneven_batches(check.random(5), device)
    with hint("accuracy = correct predictions (outputs.argmax(dim=1) == targets) summed over the whole loader / "
              "number of samples. The loader gave batches of 4, 4 and 2 samples with 4, 2 and 0 right: 6 / 10, "
              "not the mean of the per-batch accuracies."):
        check("linear", data, probe="evaluation", options={"state": state, "batch_size": 4, "keep": ("accuracy",)})


@pytest.mark.target("evaluate")
def test_runs_the_model_in_evaluation_mode(check, device):
    state, data = uneven_batches(check.random(6), device)
    with hint("the model came in training mode; evaluate calls model.eval() before the forward passes."):
        check("linear", data, probe="evaluation",
              options={"state": state, "keep": ("model.training during forward",)})


@pytest.mark.target("evaluate")
def test_builds_no_graph_while_measuring(check, device):
    state, data = uneven_batches(check.random(7), device)
    with hint("run the forward passes inside `with torch.no_grad():` so autograd records nothing."):
        check("linear", data, probe="evaluation", options={"state": state, "keep": ("autograd on during forward",)})


@pytest.mark.target("fit")
def test_records_epoch_mean_train_loss_and_val_accuracy_for_every_epoch(check, device):
    g = check.random(8)
    state, train, val = linear_state(g, 2, 2, device), separable(g, 32, device), separable(g, 16, device)
    with hint("fit makes one torch.optim.SGD(model.parameters(), lr=lr) and one nn.CrossEntropyLoss(), and for "
              "each epoch e = 1, 2, ... runs train_step on every batch (4 batches of 8 here), then appends "
              "{'epoch': e, 'train_loss': the mean of that epoch's batch losses, 'val_accuracy': evaluate(model, "
              "val_loader)}."):
        check("linear", train, val, 3, 0.5, probe="fitting", options={"state": state, "keep": ("history",)})


@pytest.mark.target("fit")
def test_reaches_90_percent_validation_accuracy_on_a_separable_problem(check, device):
    g = check.random(9)
    state, train, val = linear_state(g, 2, 2, device), separable(g, 64, device), separable(g, 64, device)
    with hint("two classes on either side of a line, 64 training samples in shuffled batches of 8, 10 epochs of "
              "SGD with lr=0.5: a working loop ends above 90% validation accuracy. Check that every batch is "
              "trained on, with the given lr, for every epoch."):
        check("linear", train, val, 10, 0.5, probe="fitting",
              options={"state": state, "loader": "shuffled", "seed": 9, "threshold": 0.9,
                       "keep": ("val_accuracy after the last epoch",)})


def no_samples(n_in, device):
    """(inputs, targets) with no samples: a DataLoader over them yields no batch at all."""
    return torch.zeros(0, n_in, dtype=torch.float64, device=device), torch.zeros(0, dtype=torch.long, device=device)


@pytest.mark.target("evaluate")
def test_raises_value_error_for_an_empty_loader(check, device):
    state = linear_state(check.random(10), 3, 3, device)
    with hint("accuracy over no samples is undefined (0 / 0): raise ValueError when the loader gave no sample."):
        check("linear", no_samples(3, device), probe="evaluation", options={"state": state, "loader": "ordered"})


@pytest.mark.target("fit")
def test_returns_an_empty_history_for_zero_epochs(check, device):
    g = check.random(11)
    state, data = linear_state(g, 2, 2, device), separable(g, 8, device)
    with hint("fit returns one record per epoch: [] for epochs=0."):
        check("linear", data, data, 0, 0.5, probe="fitting", options={"state": state, "keep": ("history",)})


@pytest.mark.target("fit")
def test_raises_value_error_for_negative_epochs(check, device):
    g = check.random(12)
    state, data = linear_state(g, 2, 2, device), separable(g, 8, device)
    with hint("a negative number of epochs is a mistake by the caller: raise ValueError (range(epochs) would "
              "silently train nothing)."):
        check("linear", data, data, -1, 0.5, probe="fitting", options={"state": state, "keep": ("history",)})


@pytest.mark.target("fit")
def test_raises_value_error_for_a_train_loader_without_batches(check, device):
    g = check.random(13)
    state, data = linear_state(g, 2, 2, device), separable(g, 8, device)
    with hint("a train_loader that yields no batch leaves no loss to average: raise ValueError."):
        check("linear", no_samples(2, device), data, 2, 0.5, probe="fitting",
              options={"state": state, "loader": "ordered", "keep": ("history",)})


@pytest.mark.target("set_seed")
def test_repeats_for_a_seed_beyond_32_bits(check, device):
    seed = 2**32 + 2**31 + 5
    with hint(f"NumPy takes only 32-bit seeds: seed it with seed % 2**32 (set_seed({seed}) must work and repeat)."):
        check(seed, probe="seeding", options={"device": device})


@pytest.mark.target("set_seed")
def test_draws_other_numbers_for_seeds_that_differ_beyond_31_bits(check, device):
    with hint("NumPy is seeded with seed % 2**32: set_seed(5) and set_seed(5 + 2**31) must start it differently."):
        check(5, probe="seeding", options={"device": device, "other": 5 + 2**31})
