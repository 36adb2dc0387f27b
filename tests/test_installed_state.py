"""What the student's code changed of installed code's state (torchgrade.sandbox.installed_state): the globals and
class attributes that torch's own Python code reads while it runs for a call the watch excuses as torch's."""

import functools
import os
import sys
import sysconfig
import types

import pytest
import torch

from torchgrade.sandbox import installed_state


@pytest.fixture
def kept(monkeypatch):
    """An installed module of the test's own (a class in it), kept as `take` keeps modules before student code."""
    module = types.ModuleType("fake_installed")
    module.__file__ = os.path.join(sysconfig.get_paths()["purelib"], "fake_installed.py")
    module.limit = 3
    module.Kind = type("Kind", (), {"__module__": "fake_installed", "size": 1})
    monkeypatch.setitem(sys.modules, "fake_installed", module)
    for name in ("_kept", "_clean"):
        monkeypatch.setattr(installed_state, name, [])
    monkeypatch.setattr(installed_state, "_read", None)
    installed_state.take()
    assert installed_state.changes(True) == []
    return module


def test_a_value_that_is_not_installed_codes_own_is_named_at_every_look_while_it_stays(kept):
    kept.limit = functools.partial(torch.relu)
    kept.Kind.size = property(len)
    expected = ["fake_installed.limit", "fake_installed.Kind.size"]
    assert installed_state.changes(False) == expected
    assert installed_state.changes(True) == expected  # (not taken as the new state)
    kept.limit, kept.Kind.size = 3, 1
    assert installed_state.changes(False) == []


def test_a_value_set_and_put_back_since_the_last_look_is_named_where_a_request_ends(kept):
    kept.limit = types.SimpleNamespace(relu=torch.relu)
    kept.limit = 3
    assert installed_state.changes(False) == []  # (a look before torch's code runs: only what is still changed)
    kept.limit = functools.partial(torch.relu)
    kept.limit = 3
    assert installed_state.changes(True) == ["fake_installed (a value set and put back)"]
    assert installed_state.changes(True) == []  # (named once)


def test_a_change_installed_code_makes_itself_is_taken_as_the_new_state(kept):
    kept.limit = 4
    kept.registry = {"once": (1, "a")}
    kept.imported = functools  # (an installed module, as a lazy import sets it)
    assert installed_state.changes(True) == []
    kept.registry = {"once": (1, "a")}
    kept.other = [torch.relu]  # (a builtin in a container is read through: not plain)
    assert installed_state.changes(True) == ["fake_installed.other"]


def test_a_module_or_class_of_the_students_is_not_installed_codes_own(kept, tmp_path, monkeypatch):
    students = types.ModuleType("students")
    students.__file__ = str(tmp_path / "students.py")
    monkeypatch.setitem(sys.modules, "students", students)
    kept.torch = students
    kept.Tensor = type("Tensor", (), {"__module__": "students"})
    assert installed_state.changes(False) == ["fake_installed.torch", "fake_installed.Tensor"]


def test_without_dictionary_versions_only_what_stays_changed_is_seen_where_a_request_ends(kept, monkeypatch):
    monkeypatch.setattr(installed_state, "_read", None)
    kept.limit = functools.partial(torch.relu)
    assert installed_state.changes(False) == []
    assert installed_state.changes(True) == ["fake_installed.limit"]
    kept.limit = 3
    assert installed_state.changes(True) == []


def test_what_changed_before_the_students_code_is_settled(kept):
    kept.limit = functools.partial(torch.relu)  # (as the sandbox sets its own streams)
    installed_state.settle()
    assert installed_state.changes(True) == []
