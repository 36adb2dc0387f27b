"""The devices.py checks: the reference scores full marks, the stubs zero, another correct implementation full
marks, and each realistic mistake loses its own points, with a message that says what went wrong."""

import pytest
import torch

from torchgrade.engine.grading import grade_submission

from conftest import ROOT, failures, lost_targets


@pytest.mark.parametrize("base, expected", [("reference", "full"), ("exercises", "zero")])
def test_reference_scores_full_marks_and_the_stubs_zero(assignment, base, expected):
    g = grade_submission(ROOT / base, assignment, device="cpu", only=("devices",))
    assert g.max_score == pytest.approx(assignment.exercise("devices").points)
    assert g.score == (g.max_score if expected == "full" else 0), [(t.name, t.output) for t in g.tests
                                                                   if t.status != "passed"][:3]
    if expected == "zero":
        assert all("not implemented yet" in t.output for t in g.tests if t.status != "skipped")


def wrapped_to_device(body):
    """A submission whose to_device runs `body` first and otherwise defers to the reference's (which
    recurses through the new to_device, so the mistake reaches every level)."""
    return {"append": {"devices": "_reference_to_device = to_device\n\n\ndef to_device(obj, device):\n"
                                  + body + "    return _reference_to_device(obj, device)\n"}}


def test_pick_device_that_ignores_prefer_loses_points_on_a_machine_without_cuda_too(grade):
    """The notes' one-liner gives "cuda" for pick_device("cpu") where CUDA is available; the checks also ask
    as on a machine with a GPU, so it is caught on any machine."""
    g = grade(only=("devices.pick_device",), replace={"devices": [
        ('    if str(prefer) == "cuda" and torch.cuda.is_available():\n', "    if torch.cuda.is_available():\n")]})
    assert lost_targets(g) == {"devices.pick_device"}


def test_pick_device_that_imported_is_available_by_name_keeps_full_marks(grade):
    """The checks ask as on a machine with and without a GPU; code that imported torch.cuda's function by
    name gets the same answers as code that calls torch.cuda.is_available()."""
    g = grade(only=("devices.pick_device",), replace={"devices": [
        ("\nimport torch\n", "\nimport torch\nfrom torch.cuda import is_available\n"),
        ('    if str(prefer) == "cuda" and torch.cuda.is_available():\n', '    if str(prefer) == "cuda" and is_available():\n')]})
    assert lost_targets(g) == set()


def test_to_device_that_turns_tuples_into_lists_loses_to_device_points(grade):
    g = grade(only=("devices",), **wrapped_to_device(
        "    if isinstance(obj, tuple):\n        return [to_device(item, device) for item in obj]\n"))
    assert lost_targets(g) == {"devices.to_device"}
    message = failures(g, "devices.to_device")[0]
    assert "called: to_device('meta') [inputs from seed 2]" in message
    assert "obj (the first argument) = (<float32 tensor of shape (3,)>, Batch(<float32 tensor of shape (2, 2)>, " \
           "(<float32 tensor of shape (1,)>, 'label')))" in message
    assert "['structure']['out']: expected 'tuple', got 'list'" in message
    assert "a tuple comes back a tuple (not a list)" in message


def test_to_device_that_loses_a_named_tuples_type_loses_to_device_points(grade):
    g = grade(only=("devices",), **wrapped_to_device(
        "    if isinstance(obj, tuple):\n        return tuple(to_device(item, device) for item in obj)\n"))
    assert lost_targets(g) == {"devices.to_device"}
    message = failures(g, "devices.to_device")[0]
    assert "['structure']['out[1]']: expected 'Batch (a named tuple)', got 'tuple'" \
        in message
    assert "type(obj)(*items)" in message


def test_to_device_that_misses_nested_tensors_loses_to_device_points(grade):
    g = grade(only=("devices",), append={"devices": """
        def to_device(obj, device):
            if isinstance(obj, torch.Tensor):
                return obj.to(device)
            if isinstance(obj, dict):
                return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in obj.items()}
            if isinstance(obj, (list, tuple)):
                return type(obj)(v.to(device) if isinstance(v, torch.Tensor) else v for v in obj)
            return obj
    """})
    assert lost_targets(g) == {"devices.to_device"}
    message = failures(g, "devices.to_device")[0]
    assert "['structure'][\"out['inputs'][0]\"]: expected 'float32 tensor of shape (2, 3) on meta', " \
           "got 'float32 tensor of shape (2, 3) on cpu'" in message
    assert "however deep" in message


def test_to_device_that_rebuilds_a_defaultdict_without_its_factory_loses_to_device_points(grade):
    g = grade(only=("devices",), replace={"devices": [(
        "        if isinstance(obj, defaultdict):\n            return type(obj)(obj.default_factory, pairs)\n", "")]})
    assert lost_targets(g) == {"devices.to_device"}
    # the first check of several about it that fails (visible ones come first); this is the hidden one's message
    assert any("your code raised TypeError: first argument must be callable or None" in message
               and "the same default_factory" in message for message in failures(g, "devices.to_device"))


def test_to_device_that_moves_a_module_loses_to_device_points(grade):
    g = grade(only=("devices",), **wrapped_to_device(
        "    if isinstance(obj, torch.nn.Module):\n        return obj.to(device)\n"))
    assert lost_targets(g) == {"devices.to_device"}
    assert any("['structure']['out[5]']: expected \"torch.nn.modules.linear.Linear: the object passed in, its tensors "
               "on ['cpu']\", got \"torch.nn.modules.linear.Linear: the object passed in, its tensors on ['meta']\""
               in message for message in failures(g, "devices.to_device"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a machine with CUDA this mistake picks the right device")
def test_pick_device_that_does_not_call_is_available_loses_pick_device_points(grade):
    g = grade(only=("devices",), replace={"devices": [("torch.cuda.is_available():", "torch.cuda.is_available:")]})
    assert lost_targets(g) == {"devices.pick_device"}
    message = failures(g, "devices.pick_device")[0]
    assert "called: pick_device()" in message and "['device type']: expected 'cpu', got 'cuda'" in message
    assert "call it: the bare function is always true" in message


def test_pick_device_that_returns_a_string_loses_pick_device_points(grade):
    g = grade(only=("devices",), replace={"devices": [('return torch.device("cpu")', 'return "cpu"')]})
    assert lost_targets(g) == {"devices.pick_device"}
    message = failures(g, "devices.pick_device")[0]
    assert "called: pick_device('cpu')" in message and "['class']: expected 'torch.device', got 'str'" in message


def test_another_correct_implementation_scores_full_marks(grade):
    """Fairness: a one-line pick_device, and a to_device that dispatches differently (named tuples through
    _make, mappings through a dict comprehension handed to the type, defaultdict through copy)."""
    g = grade(only=("devices",), append={"devices": """
        import copy
        from collections.abc import Mapping

        def pick_device(prefer="cuda"):
            return torch.device("cuda" if prefer == "cuda" and torch.cuda.is_available() else "cpu")

        def to_device(obj, device):
            if torch.is_tensor(obj):
                return obj.to(device=device)
            if isinstance(obj, defaultdict):
                out = copy.copy(obj)
                out.clear()
                out.update({k: to_device(v, device) for k, v in obj.items()})
                return out
            if isinstance(obj, Mapping):
                return type(obj)({k: to_device(v, device) for k, v in obj.items()})
            if hasattr(obj, "_make"):
                return obj._make(to_device(v, device) for v in obj)
            if isinstance(obj, (list, tuple, set, frozenset)):
                return type(obj)([to_device(v, device) for v in obj])
            return obj
    """})
    assert g.score == g.max_score, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]
