"""The training.py checks: the reference scores full marks, the stubs zero, another correct implementation
full marks, and each realistic mistake loses its own points, with a message that says what went wrong.

fit calls train_step and evaluate, so a mistake in either also costs fit. To show that a check of
train_step or evaluate catches the mistake by itself, those submissions keep fit on the reference's
copies (``_reference_train_step``, ``_reference_evaluate``).
"""

import pytest

from torchgrade.engine.grading import grade_submission

from conftest import ROOT, failures, lost_targets


@pytest.mark.parametrize("base, expected", [("reference", "full"), ("exercises", "zero")])
def test_reference_scores_full_marks_and_the_stubs_zero(assignment, base, expected):
    g = grade_submission(ROOT / base, assignment, device="cpu", only=("training",))
    assert g.max_score == pytest.approx(assignment.exercise("training").points)
    assert g.score == (g.max_score if expected == "full" else 0), [(t.name, t.output) for t in g.tests
                                                                   if t.status != "passed"][:3]
    if expected == "zero":
        assert all("not implemented yet" in t.output for t in g.tests if t.status != "skipped")


CALLS_IN_FIT = {"train_step": "[train_step(model, batch, loss_fn, optimizer)",
                "evaluate": '"val_accuracy": evaluate(model, val_loader)'}


def with_reference_copy(name, old, new):
    """A submission where `name` has `old` replaced by `new`; fit keeps calling a reference copy of `name`."""
    return {
        "replace": {"training": [(CALLS_IN_FIT[name], CALLS_IN_FIT[name].replace(name, f"_reference_{name}"))]},
        "append": {"training": f"""
            import inspect as _inspect
            _reference_{name} = {name}
            _source = _inspect.getsource({name})
            assert _source.count({old!r}) == 1, "the reference changed: update this test"
            exec(_source.replace({old!r}, {new!r}))
        """},
    }


def test_set_seed_that_misses_numpy_loses_set_seed_points(grade):
    g = grade(only=("training",), replace={"training": [("np.random.seed(seed % 2**32)", "pass")]})
    assert lost_targets(g) == {"training.set_seed"}
    message = failures(g, "training.set_seed")[0]
    assert "called: set_seed(1234)" in message
    assert "['numpy.random repeats after set_seed(1234)']: expected True, got False" in message
    assert "numpy.random.seed" in message


def test_train_step_that_does_not_clear_old_gradients_loses_train_step_points(grade):
    g = grade(only=("training",), **with_reference_copy("train_step", "    optimizer.zero_grad()\n", ""))
    assert lost_targets(g) == {"training.train_step"}
    messages = failures(g, "training.train_step")
    assert any("['parameters after each step'][0]['weight']" in m and "elements differ" in m
               and "[inputs from seed 3]" in m and "optimizer.zero_grad() before loss.backward()" in m
               for m in messages)


def test_train_step_that_does_not_step_loses_train_step_points(grade):
    g = grade(only=("training",), **with_reference_copy("train_step", "    optimizer.step()\n", ""))
    assert lost_targets(g) == {"training.train_step"}
    assert any("['parameters changed by the first step']: expected True, got False" in m
               and "optimizer.step() applies the gradients" in m for m in failures(g, "training.train_step"))


def test_train_step_that_clears_gradients_after_backward_loses_train_step_points(grade):
    g = grade(only=("training",), **with_reference_copy(
        "train_step", "    loss.backward()\n", "    loss.backward()\n    optimizer.zero_grad()\n"))
    assert lost_targets(g) == {"training.train_step"}
    assert any("['parameters changed by the first step']: expected True, got False" in m
               for m in failures(g, "training.train_step"))


def test_train_step_that_returns_the_loss_tensor_loses_train_step_points(grade):
    g = grade(only=("training",), **with_reference_copy("train_step", "return loss.item()", "return loss"))
    assert lost_targets(g) == {"training.train_step"}
    message = failures(g, "training.train_step")[0]
    assert "['type of the returned loss']: expected ['float', 'float'], got ['Tensor', 'Tensor']" in message
    assert "a Python float" in message


def test_train_step_that_forgets_training_mode_loses_train_step_points(grade):
    g = grade(only=("training",), **with_reference_copy("train_step", "    model.train()\n", ""))
    assert lost_targets(g) == {"training.train_step"}
    message = failures(g, "training.train_step")[0]
    assert "['model.training during forward']: expected [True], got [False]" in message
    assert "model.train()" in message


def test_evaluate_that_builds_a_graph_loses_evaluate_points(grade):
    g = grade(only=("training",), **with_reference_copy("evaluate", "    with torch.no_grad():\n        for",
                                                        "    if True:\n        for"))
    assert lost_targets(g) == {"training.evaluate"}
    message = failures(g, "training.evaluate")[0]
    assert "['autograd on during forward']: expected [False], got [True]" in message
    assert "torch.no_grad()" in message


def test_evaluate_that_stays_in_training_mode_loses_evaluate_points(grade):
    g = grade(only=("training",), **with_reference_copy("evaluate", "    model.eval()\n", ""))
    assert lost_targets(g) == {"training.evaluate"}
    message = failures(g, "training.evaluate")[0]
    assert "['model.training during forward']: expected [False], got [True]" in message
    assert "model.eval()" in message


def test_evaluate_that_averages_per_batch_accuracies_loses_evaluate_points(grade):
    g = grade(only=("training",), **with_reference_copy(
        "evaluate", "    return correct / total\n",
        "    return sum(_reference_evaluate(model, [batch]) for batch in loader) / len(loader)\n"))
    assert lost_targets(g) == {"training.evaluate"}
    message = failures(g, "training.evaluate")[0]
    assert "['accuracy']: expected 0.6, got 0.5" in message
    assert "[inputs from seed 5]" in message and "not the mean of the per-batch accuracies" in message


def test_fit_that_numbers_epochs_from_0_loses_fit_points(grade):
    g = grade(only=("training",), replace={"training": [("for epoch in range(1, epochs + 1):",
                                                         "for epoch in range(epochs):")]})
    assert lost_targets(g) == {"training.fit"}
    message = failures(g, "training.fit")[0]
    assert "['history'][0]['epoch']: expected 1, got 0" in message and "[inputs from seed 8]" in message


def test_fit_that_sums_the_batch_losses_loses_fit_points(grade):
    g = grade(only=("training",), replace={"training": [('"train_loss": sum(losses) / len(losses),',
                                                         '"train_loss": sum(losses),')]})
    assert lost_targets(g) == {"training.fit"}
    message = failures(g, "training.fit")[0]
    assert "['history'][0]['train_loss']: expected" in message and "the mean of that epoch's batch losses" in message


def test_fit_that_ignores_lr_does_not_reach_the_stated_accuracy(grade):
    g = grade(only=("training",), replace={"training": [("optimizer = torch.optim.SGD(model.parameters(), lr=lr)",
                                                         "optimizer = torch.optim.SGD(model.parameters(), lr=0.001)")]})
    assert lost_targets(g) == {"training.fit"}
    messages = failures(g, "training.fit")
    assert any("['val_accuracy after the last epoch']: expected 'at least 0.9', got '" in m and "(below 0.9)'" in m
               and "[inputs from seed 9]" in m for m in messages)


def test_another_correct_implementation_scores_full_marks(grade):
    """Fairness: other valid orders and forms (zeroing through the model, float(loss), one big forward in
    evaluate under inference_mode returning a tensor, fit with its own loop weighting losses by batch size)."""
    g = grade(only=("training",), append={"training": """
        import numpy

        def set_seed(seed):
            torch.random.manual_seed(seed)
            numpy.random.seed(seed % 2**32)  # NumPy takes 32-bit seeds (the docstring)
            random.seed(seed)

        def train_step(model, batch, loss_fn, optimizer):
            model.train()
            model.zero_grad(set_to_none=False)
            loss = loss_fn(model(batch[0]), batch[1])
            loss.backward()
            optimizer.step()
            return float(loss)

        def evaluate(model, loader):
            model.eval()
            with torch.inference_mode():
                pairs = [(model(x), y) for x, y in loader]
                if not pairs:
                    raise ValueError("accuracy over no samples is undefined")
                outputs = torch.cat([o for o, _ in pairs])
                targets = torch.cat([t for _, t in pairs])
                return (outputs.argmax(1) == targets).double().mean()

        def fit(model, train_loader, val_loader, epochs, lr):
            if epochs < 0:
                raise ValueError("epochs must be >= 0")
            optimizer = torch.optim.SGD(model.parameters(), lr)
            history = []
            for epoch in range(epochs):
                total, count = 0.0, 0
                for x, y in train_loader:
                    model.train()
                    optimizer.zero_grad()
                    loss = nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total, count = total + loss.item() * len(y), count + len(y)
                if count == 0:
                    raise ValueError("the train loader gave no batch")
                history.append({"val_accuracy": evaluate(model, val_loader), "train_loss": total / count,
                                "epoch": epoch + 1})
            return history
    """})
    assert g.score == g.max_score, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]
