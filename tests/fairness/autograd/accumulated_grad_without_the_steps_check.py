# expect: loses {"accumulated_grad": ["test_rejects_negative_steps_with_value_error"]}
# message: expected ValueError to be raised (steps must be >= 0, got -1), but the call returned a Tensor
# never: as PyTorch does
"""accumulated_grad right for every steps >= 0, but a negative steps returns zeros instead of raising."""


def accumulated_grad(w, x, steps):
    w = w.detach().clone().requires_grad_()
    x = x.detach().clone().requires_grad_()
    for _ in range(steps):
        ((x + w) * (w + 1)).backward()
    return torch.zeros_like(w) if w.grad is None else w.grad.detach().clone()
