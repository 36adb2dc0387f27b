# expect: full marks
# on cuda: loses {"LegendreP3": ["test_computes_p3_of_0_d_3_d_and_float32_inputs[3-d]", "test_computes_p3_of_0_d_3_d_and_float32_inputs[float32]", "test_matches_the_notes_values_and_derivatives", "test_p3_backward_passes_gradcheck"], "legendre_model": ["test_broadcasts_numbers_and_0_d_parameters_over_a_vector_x", "test_takes_numbers_for_a_and_b_and_broadcasts_over_a_vector_x"]}
"""LegendreP3's backward subtracts a ones tensor made on the CPU: right on the CPU, a device mismatch
inside backward on CUDA."""


class LegendreP3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * (5 * x ** 3 - 3 * x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * x ** 2 - torch.ones(x.shape, dtype=x.dtype))
