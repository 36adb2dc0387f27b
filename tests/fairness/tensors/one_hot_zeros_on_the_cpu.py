# expect: full marks
# on cuda: loses {"one_hot": ["test_encodes_a_zero_dim_label_as_one_row", "test_encodes_labels_as_int64_rows", "test_gives_an_empty_result_for_empty_labels", "test_infers_the_number_of_classes_from_minus_one_as_in_the_docstring", "test_infers_the_number_of_classes_when_given_minus_one", "test_keeps_the_shape_of_2d_labels", "test_leaves_the_labels_unchanged"]}
"""one_hot's zeros made with torch.zeros (the default device) instead of on the labels' device: right on
the CPU, and on CUDA a scatter_ of CUDA labels into a CPU tensor."""


def one_hot(labels, num_classes=-1):
    if labels.dtype != torch.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if labels.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return torch.zeros(tuple(labels.shape) + (num_classes,), dtype=torch.int64)
    if int(labels.min()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(labels.max()) + 1
    elif num_classes <= int(labels.max()):
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = torch.zeros(tuple(labels.shape) + (num_classes,), dtype=torch.int64)
    return scatter_(out, -1, labels.unsqueeze(-1), 1)
