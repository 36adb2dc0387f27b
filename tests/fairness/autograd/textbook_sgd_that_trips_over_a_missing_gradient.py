# expect: loses {"sgd_step_": ["test_skips_parameters_without_a_gradient"]}
# message: skip the parameters whose .grad is None
# message: plus a parameter `unused` that the loss does not use
"""The textbook update, right for every parameter with a gradient, but it does not skip one without
(p.grad is None): only the check about such parameters may fail."""


def sgd_step_(params, lr):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad.zero_()
