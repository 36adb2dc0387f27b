# expect: loses {"pool2d": ["test_accepts_a_pool_size_of_1_and_padding_of_half_the_pool_size[avg]", "test_average_counts_the_padding_zeros", "test_average_divides_border_windows_by_the_full_pool_size", "test_keeps_int64_with_padding[avg]", "test_matches_torch_pooling_with_strides_and_padding[avg-one-row-window]", "test_matches_torch_pooling_with_strides_and_padding[avg-pairs]", "test_passes_gradients_back_in_float64_with_padding[avg]", "test_pools_a_permuted_input[avg]", "test_pools_every_channel_of_a_batch[avg]"]}
# message: padding counts as -inf for max pooling and as zeros (included in the count)
"""Average pooling that divides by the number of real elements in the window (count_include_pad=False)."""


_reference_pool2d = pool2d


def pool2d(X, pool_size, mode="max", stride=1, padding=0):
    if mode != "avg":
        return _reference_pool2d(X, pool_size, mode, stride, padding)
    ones = torch.ones(X.shape[-2:], dtype=torch.float64, device=X.device)
    total = _reference_pool2d(X.double() if X.is_floating_point() else X, pool_size, "avg", stride, padding)
    count = _reference_pool2d(ones, pool_size, "avg", stride, padding)
    return (total / count).to(X.dtype) if X.is_floating_point() else torch.div(total, count).to(X.dtype)
