# expect: loses {"view": ["test_follows_the_strides_of_a_transposed_input_as_in_the_docstring", "test_gives_size_one_dims_the_strides_tensor_view_does", "test_keeps_the_strides_of_an_input_with_no_elements_for_the_same_shape", "test_matches_tensor_view_on_sliced_and_expanded_inputs", "test_matches_tensor_view_on_unusual_inputs[expanded-incompatible]", "test_matches_tensor_view_on_unusual_inputs[expanded]", "test_matches_tensor_view_on_unusual_inputs[sliced-with-steps]", "test_matches_tensor_view_on_unusual_inputs[transposed-compatible]", "test_matches_tensor_view_on_unusual_inputs[transposed-incompatible]", "test_passes_gradients_back_through_a_non_contiguous_view", "test_raises_runtime_error_for_an_invalid_shape[a-dim-spanning-two-chunks]"]}
# message: (as Tensor.view does: view size is not compatible with input tensor's size and stride
# message: but the call returned a Tensor
# never: input_after_writing_through_result
"""view that infers the shape right but always gives the result contiguous strides (right for a
contiguous x only): wrong strides on non-contiguous inputs, and no error where Tensor.view raises."""


def view(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    if not shape:
        raise TypeError("view() needs a shape")
    size = _infer_size([operator.index(s) for s in shape], x.numel())
    stride, acc = [], 1
    for s in reversed(size):
        stride.insert(0, acc)
        acc *= max(s, 1)
    return x.as_strided(size, stride, x.storage_offset())
