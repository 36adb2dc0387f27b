"""Visible checks for devices.py: choosing a device, and moving the tensors of nested batches onto one.

to_device moves tensors to the meta device when graded on the CPU (a second device every machine
has: tensors there have a shape and a dtype but no values) and to the GPU when graded on CUDA.
The structure to move is sent as a spec (``torchgrade/sandbox/probes/devices.py``: containers other
than lists, tuples and dicts are tagged dicts, ``{"__kind__": "namedtuple", "name": "Batch", "items":
[...]}`` is ``Batch(*items)``) and shown in a failure's message as the object it stands for; the
result is described place by place: ``out``, ``out[0]``, ``out['inputs'][1]``.
"""

import contextlib

import pytest
import torch

from torchgrade.engine.differential import CheckFailed


@contextlib.contextmanager
def hint(text):
    """On a plain failure, add what the contract asks (and what the input was) to the message."""
    try:
        yield
    except CheckFailed as e:
        if type(e) is not CheckFailed or "not implemented yet" in str(e):  # a forbidden call keeps its type
            raise
        raise CheckFailed(f"{e}\nhint: {text}") from None


def destination(device):
    """Where to_device sends tensors in a check run on `device`: the GPU, or the meta device on a CPU."""
    return "cuda" if device == "cuda" else "meta"


def tensors(check, seed, *shapes, dtype=torch.float32):
    g = check.random(seed)
    return [torch.randn(*shape, generator=g).to(dtype) for shape in shapes]


def namedtuple(name, *items):
    return {"__kind__": "namedtuple", "name": name, "items": list(items)}


def render(spec):
    """A spec as the Python object it stands for; tensors by dtype and shape only (no values)."""
    if isinstance(spec, torch.Tensor):
        return f"<{str(spec.dtype).replace('torch.', '')} tensor of shape {tuple(spec.shape)}>"
    if type(spec) is list:
        return "[" + ", ".join(map(render, spec)) + "]"
    if type(spec) is tuple:
        return "(" + ", ".join(map(render, spec)) + ("," if len(spec) == 1 else "") + ")"
    if type(spec) is not dict:
        return repr(spec)
    kind = spec.get("__kind__")
    items = ", ".join(map(render, spec.get("items", ())))
    entries = ", ".join(f"{k!r}: {render(v)}" for k, v in dict(spec.get("entries", spec)).items())
    return {
        None: lambda: "{" + entries + "}",
        "namedtuple": lambda: f"{spec.get('name')}({items})",
        "set": lambda: "{" + items + "}" if items else "set()",
        "frozenset": lambda: "frozenset({" + items + "})",
        "defaultdict": lambda: f"defaultdict({spec.get('factory')}, {{{entries}}})",
        "OrderedDict": lambda: f"OrderedDict({{{entries}}})",
        "max": lambda: f"torch.max({render(spec.get('of'))}, dim=0)",
        "Linear": lambda: "nn.Linear(2, 2)",
        "Opaque": lambda: f"Opaque({render(spec.get('tensor'))})",
    }[kind]()


def moved(check, obj, device, text):
    """check to_device(obj, device) with the probe `moved`; a failure shows obj and `text`."""
    with hint(f"{text}\nobj (the first argument) = {render(obj)}"):
        check(device, probe="moved", options={"obj": obj})


@pytest.mark.target("pick_device")
def test_returns_the_cpu_when_asked_for_the_cpu(check, device):
    # The CUDA variant runs this where CUDA is available: "cpu" must win over an available GPU.
    with hint('pick_device("cpu") is torch.device("cpu") on every machine: look at `prefer` before asking '
              "whether CUDA is available."):
        check("cpu", probe="chosen_device")
        # and as on a machine with a GPU, whatever this one has
        check("cpu", probe="chosen_device", options={"cuda_available": True})


@pytest.mark.target("pick_device")
def test_returns_cuda_exactly_when_it_is_available(check):
    with hint('pick_device() and pick_device("cuda") are torch.device("cuda") when torch.cuda.is_available() '
              '(call it: the bare function is always true), else torch.device("cpu").'):
        check(probe="chosen_device")
        check("cuda", probe="chosen_device")
        # as on a machine with a GPU and on one without, whatever this one has
        for available in (True, False):
            check(probe="chosen_device", options={"cuda_available": available})
            check("cuda", probe="chosen_device", options={"cuda_available": available})


@pytest.mark.target("to_device")
def test_moves_every_tensor_in_nested_lists_and_dicts(check, device):
    a, b, c = tensors(check, 1, (2, 3), (4,), (3,))
    moved(check, {"inputs": [a, [b, 3]], "target": c, "name": "batch"}, destination(device),
          "to_device goes into every list and dict, however deep, and calls .to(device) on each tensor it finds; a "
          "list comes back a list and a dict a dict, with the same keys; anything that is not a tensor or a "
          "container (3, 'batch') comes back as it is.")


@pytest.mark.target("to_device")
def test_keeps_tuples_as_tuples_and_named_tuples_as_their_own_type(check, device):
    a, b, c = tensors(check, 2, (3,), (2, 2), (1,))
    moved(check, (a, namedtuple("Batch", b, (c, "label"))), destination(device),
          "a tuple comes back a tuple (not a list), and a named tuple as its own class, built with "
          "type(obj)(*items) since its fields are separate arguments (Batch(x, y), not Batch([x, y])).")


# --- what each stub's docstring promises, one claim per check --------------------------------------

@pytest.mark.target("pick_device")
def test_returns_the_cpu_for_a_preference_other_than_cuda(check):
    with hint('pick_device("mps") (or any prefer other than "cuda") is torch.device("cpu").'):
        check("mps", probe="chosen_device", options={"cuda_available": True})


@pytest.mark.target("to_device")
def test_moves_the_tensors_in_sets_and_keeps_other_mappings_types(check, device):
    a, b, c = tensors(check, 3, (2,), (3,), (1,))
    moved(check, [{"__kind__": "set", "items": [a, 1]}, {"__kind__": "frozenset", "items": [b]},
                  {"__kind__": "OrderedDict", "entries": [["y", c], ["x", 1]]},
                  {"__kind__": "defaultdict", "factory": "int", "entries": {"k": a}}], destination(device),
          "sets stay sets, frozensets frozensets, an OrderedDict keeps its order and a defaultdict its "
          "default_factory: rebuild each container with its own type.")


@pytest.mark.target("to_device")
def test_returns_a_bare_tensor_moved_and_anything_else_as_it_is(check, device):
    (a,) = tensors(check, 4, (2, 2), dtype=torch.float64)
    text = ("a tensor alone moves (keeping its dtype); numbers, strings, None, modules and other objects come "
            "back as they are, the same objects.")
    moved(check, a, destination(device), text)
    moved(check, [7, "s", None, {"__kind__": "Linear"}, {"__kind__": "Opaque", "tensor": a}], destination(device),
          text)


@pytest.mark.target("to_device")
def test_keeps_a_torch_return_type_as_its_own_tuple_type(check, device):
    (a,) = tensors(check, 6, (2, 3))
    moved(check, {"__kind__": "max", "of": a}, destination(device),
          "torch.max(x, dim=0) returns a torch.return_types.max, a tuple type: rebuild it as its own type, whose "
          "constructor takes one sequence (type(obj)(items)).")


@pytest.mark.target("to_device")
def test_accepts_the_device_as_a_torch_device(check, device):
    (a,) = tensors(check, 5, (3,))
    moved(check, [a, ()], torch.device(destination(device)), "device may be a string or a torch.device.")
