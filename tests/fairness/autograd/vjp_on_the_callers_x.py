# expect: loses {"vjp": ["test_leaves_a_caller_x_that_requires_grad_untouched[leaf_with_grad]", "test_leaves_a_caller_x_that_requires_grad_untouched[non_leaf]", "test_leaves_the_callers_x_and_v_as_they_were", "test_takes_the_product_at_an_x_made_under_inference_mode", "test_works_on_a_caller_x_that_is_not_a_leaf"]}
# message: changed requires_grad on a caller's tensor
"""The notes' vjp on the caller's own x (x.requires_grad_(True), backward, read x.grad): every value is
right, but the caller's x is left requiring grad and holding a .grad."""


def vjp(f, x, v):
    x.requires_grad_(True)
    x.grad = None
    y = f(x)
    if not y.requires_grad:
        return torch.zeros_like(x)
    y.backward(gradient=v)
    return torch.zeros_like(x) if x.grad is None else x.grad.clone()
