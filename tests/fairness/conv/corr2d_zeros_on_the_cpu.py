# expect: full marks
# on cuda: loses {"Conv2D": ["test_forward_is_corr2d_plus_bias", "test_forward_on_a_non_contiguous_input_with_a_tall_kernel", "test_learns_a_vertical_edge_kernel_from_another_start", "test_learns_the_edge_detection_kernel_by_gradient_descent"], "corr2d": ["test_accepts_a_1x1_kernel_and_a_kernel_as_large_as_x", "test_computes_int64_inputs_exactly", "test_keeps_float64_inputs_in_float64", "test_matches_conv2d_on_odd_shapes[kernel-as-large-as-x]", "test_matches_conv2d_on_odd_shapes[odd-sizes]", "test_matches_conv2d_on_odd_shapes[one-by-one-kernel]", "test_matches_conv2d_on_odd_shapes[one-row-input]", "test_matches_conv2d_on_odd_shapes[tall-kernel]", "test_matches_conv2d_on_odd_shapes[wide-kernel]", "test_matches_conv2d_with_a_non_square_kernel", "test_matches_the_notes_example", "test_passes_gradients_back_from_non_contiguous_inputs", "test_passes_gradients_back_to_x_and_k", "test_promotes_float32_and_float64_to_float64", "test_promotes_mixed_dtypes[float16-and-float32]", "test_promotes_mixed_dtypes[float64-and-float32]", "test_promotes_mixed_dtypes[int64-and-float32]", "test_works_on_transposed_and_stepped_inputs"]}
"""The notes' corr2d, with the output made by torch.zeros in the inputs' dtype but not on their device:
right on the CPU (and differentiable: each entry is written in place), on the CPU for CUDA inputs."""


def corr2d(X, K):
    if X.dim() != 2 or K.dim() != 2:
        raise RuntimeError("corr2d expects 2-D inputs")
    (H, W), (h, w) = X.shape, K.shape
    if h < 1 or w < 1 or h > H or w > W:
        raise RuntimeError("the kernel does not fit the input")
    dtype = torch.promote_types(X.dtype, K.dtype)
    Y = torch.zeros((H - h + 1, W - w + 1), dtype=dtype)
    for i in range(Y.shape[0]):
        for j in range(Y.shape[1]):
            Y[i, j] = (X[i:i + h, j:j + w] * K).sum()
    return Y
