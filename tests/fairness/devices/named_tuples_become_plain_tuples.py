# expect: loses {"to_device": ["test_keeps_a_torch_return_type_as_its_own_tuple_type", "test_keeps_torch_return_types", "test_keeps_tuples_as_tuples_and_named_tuples_as_their_own_type"]}
# message: expected 'Batch (a named tuple)', got 'tuple'
"""to_device that rebuilds every tuple as a plain tuple: right for lists, dicts and plain tuples, but a
named tuple comes back without its field names."""


def to_device(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(to_device(item, device) for item in obj)
    if isinstance(obj, list):
        return [to_device(item, device) for item in obj]
    if isinstance(obj, dict):
        return type(obj)((key, to_device(value, device)) for key, value in obj.items()) \
            if not isinstance(obj, defaultdict) else defaultdict(obj.default_factory, {
                key: to_device(value, device) for key, value in obj.items()})
    if isinstance(obj, (set, frozenset)):
        return type(obj)(to_device(item, device) for item in obj)
    return obj
