"""Hidden checks for devices.py: other preferences, sets, defaultdicts, OrderedDicts, torch.return_types,
objects that are not containers, dtypes, empty and deep structures."""

import pytest
import torch

from graders.checks.visible.test_devices import destination, hint, moved, namedtuple, tensors


@pytest.mark.target("pick_device")
@pytest.mark.parametrize("prefer", ["mps", "xpu"])
def test_returns_the_cpu_for_any_other_preference(check, prefer):
    with hint(f'pick_device("{prefer}") is torch.device("cpu"): only "cuda" may give another device.'):
        check(prefer, probe="chosen_device", options={"cuda_available": True})


@pytest.mark.target("to_device")
def test_moves_the_items_of_sets_and_frozensets(check, device):
    a, b, c = tensors(check, 10, (2,), (3,), (1, 2))
    moved(check, [{"__kind__": "set", "items": [a, b, 7]}, {"__kind__": "frozenset", "items": [c, "x"]}],
          destination(device), "a set comes back a set and a frozenset a frozenset, each tensor inside moved.")


@pytest.mark.target("to_device")
def test_keeps_a_defaultdicts_factory_and_an_ordereddicts_order(check, device):
    a, b, c = tensors(check, 11, (2,), (2, 1), (3,))
    moved(check, {"counts": {"__kind__": "defaultdict", "factory": "list", "entries": {"a": [a], "b": [b, 1]}},
                  "ordered": {"__kind__": "OrderedDict", "entries": [["z", c], ["a", 2]]}}, destination(device),
          "a defaultdict comes back a defaultdict with the same default_factory (defaultdict(factory, pairs)), an "
          "OrderedDict with its keys in the same order.")


@pytest.mark.target("to_device")
def test_keeps_torch_return_types(check, device):
    (a,) = tensors(check, 12, (3, 4))
    moved(check, {"max": {"__kind__": "max", "of": a}, "sample": namedtuple("Sample", a[0], 1, None)},
          destination(device), "torch.max(x, dim=0) returns a torch.return_types.max, a tuple type whose constructor "
          "takes one sequence (type(obj)(items)); a named tuple's takes its fields as separate arguments.")


@pytest.mark.target("to_device")
def test_returns_objects_that_are_not_containers_as_they_are(check, device):
    (a,) = tensors(check, 13, (2,))
    moved(check, [1, 2.5, "text", None, True, {"__kind__": "Linear"}, {"__kind__": "Opaque", "tensor": a}],
          destination(device), "only tensors move and only lists, tuples, dicts and sets are entered; anything else "
          "(numbers, strings, None, an nn.Module, any other object) is returned as it is, the same object, "
          "untouched (do not call .to on it).")


@pytest.mark.target("to_device")
def test_keeps_every_dtype_and_moves_a_bare_tensor(check, device):
    (a,) = tensors(check, 14, (2, 3), dtype=torch.float64)
    text = "only the device changes: .to(device) keeps each tensor's dtype and shape (0-dim included)."
    moved(check, [a, torch.arange(4), torch.tensor([True, False]), torch.tensor(3.5, dtype=torch.float16)],
          destination(device), text)
    moved(check, a, destination(device), text)


@pytest.mark.target("to_device")
def test_handles_empty_and_deeply_nested_containers(check, device):
    (a,) = tensors(check, 15, (2,))
    deep = a
    for level in range(12):
        deep = [deep] if level % 3 == 0 else (deep,) if level % 3 == 1 else {"level": deep}
    moved(check, [[], (), {}, deep], destination(device),
          "empty containers come back as empty containers of the same type; nesting may go deep.")


@pytest.mark.target("to_device")
def test_accepts_a_torch_device(check, device):
    (a,) = tensors(check, 16, (3,))
    moved(check, {"x": (a,)}, torch.device(destination(device)), "device may be a string or a torch.device.")
