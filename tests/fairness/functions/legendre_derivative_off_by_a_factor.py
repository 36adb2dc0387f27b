# expect: loses {"LegendreP3": ["test_computes_p3_of_0_d_3_d_and_float32_inputs[0-d]", "test_computes_p3_of_0_d_3_d_and_float32_inputs[3-d]", "test_computes_p3_of_0_d_3_d_and_float32_inputs[float32]", "test_matches_the_notes_values_and_derivatives", "test_p3_backward_passes_gradcheck"], "legendre_model": ["test_broadcasts_numbers_and_0_d_parameters_over_a_vector_x", "test_matches_the_notes_example_through_legendre_p3", "test_takes_numbers_for_a_and_b_and_broadcasts_over_a_vector_x"]}
# message: by your backward
# message: by finite differences
"""LegendreP3's backward with the derivative 1.5 * (5x² - 1) written as 5 * (1.5x² - 1): the forward
is right, so only the checks of the gradient may fail (legendre_model's too: it is built on LegendreP3)."""


class LegendreP3(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * (5 * x ** 3 - 3 * x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 5 * (1.5 * x ** 2 - 1)
