# expect: loses {"evaluate": ["test_runs_the_model_in_evaluation_mode"], "fit": ["test_trains_in_training_mode_and_evaluates_in_eval_mode_every_epoch"]}
# message: expected [False], got [True]
"""evaluate without model.eval(): right for a model without dropout or batch norm, wrong for one with
(and fit, which evaluates with it, evaluates in training mode too)."""


def evaluate(model, loader):
    correct = total = 0
    with torch.no_grad():
        for inputs, targets in loader:
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
            total += targets.numel()
    if total == 0:
        raise ValueError("no samples")
    return correct / total
