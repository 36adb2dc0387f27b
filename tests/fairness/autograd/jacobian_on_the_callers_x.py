# expect: loses {"jacobian": ["test_builds_the_jacobian_at_an_x_made_under_inference_mode", "test_differentiates_a_caller_x_that_is_not_a_leaf", "test_leaves_the_callers_x_as_it_was_after_every_pass", "test_leaves_the_grad_and_the_graph_of_the_callers_x_untouched[leaf_with_grad]", "test_leaves_the_grad_and_the_graph_of_the_callers_x_untouched[non_leaf]"]}
"""jacobian straight on the caller's x (requires_grad_ on it, its .grad cleared between passes):
every row is right, but the caller's x is left requiring grad."""


def jacobian(f, x):
    x.requires_grad_(True)
    y = f(x)
    rows = []
    for y_i in y.reshape(-1):
        x.grad = None
        if y_i.requires_grad:
            y_i.backward(retain_graph=True)
        rows.append(torch.zeros_like(x) if x.grad is None else x.grad.clone())
    x.grad = None
    out = torch.stack(rows) if rows else x.new_zeros((0,) + x.shape)
    return out.detach().reshape(y.shape + x.shape)
