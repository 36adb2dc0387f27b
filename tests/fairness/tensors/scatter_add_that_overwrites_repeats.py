# expect: loses {"scatter_add_": ["test_accumulates_in_3d_with_negative_dims[1]", "test_accumulates_into_a_non_zero_int_target", "test_accumulates_repeated_indices", "test_adds_along_a_negative_dim", "test_adds_along_dim_1_into_a_non_zero_target", "test_adds_values_whose_index_repeats_a_position_as_in_the_docstring", "test_passes_gradients_back_to_the_added_src"]}
# message: repeated indices accumulate
"""scatter_add_ as `target[positions] += src`: the classic mistake. Advanced indexing reads every
position once and writes each back once, so where index repeats a position only one value is added
(index_put_ needs accumulate=True). Right wherever the positions are distinct."""


def scatter_add_(target, dim, index, src):
    if not isinstance(src, torch.Tensor):
        raise TypeError(f"scatter_add_(): argument 'src' must be Tensor, not {type(src).__name__}")
    dim = _scatter_checks("scatter", target, dim, index, src)
    if dim is None:
        return target
    positions = _grid(_as_1d(index), dim)
    _as_1d(target)[positions] += _scatter_values(index, src)
    return target
