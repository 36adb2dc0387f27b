"""What the student's code changed of installed code's state (torchgrade.sandbox.installed_state): the globals and
class attributes that torch's own Python code reads while it runs for a call the watch excuses as torch's."""

import contextlib
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
    module = types.ModuleType("torch.fake_installed")
    module.__file__ = os.path.join(sysconfig.get_paths()["purelib"], "fake_installed.py")
    module.limit = 3
    module.Kind = type("Kind", (), {"__module__": "torch.fake_installed", "size": 1})
    monkeypatch.setitem(sys.modules, "torch.fake_installed", module)
    module.managed = contextlib.contextmanager(lambda: iter([None]))  # (a closure of installed code's)
    for name, empty in (("_kept", []), ("_clean", []), ("_spaces", set()), ("_PACKAGES", set()), ("_read", None),
                        ("_cells", []), ("_clean_cells", []), ("_read_cells", None), ("_functions", set())):
        monkeypatch.setattr(installed_state, name, empty)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # (the keeper of later imports goes with it)
    installed_state.take()
    assert installed_state.changes(True) == []
    return module


def test_a_value_that_is_not_installed_codes_own_is_named_at_every_look_while_it_stays(kept):
    kept.limit = functools.partial(torch.relu)
    kept.Kind.size = property(len)
    expected = ["torch.fake_installed.limit", "torch.fake_installed.Kind.size"]
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
    assert installed_state.changes(True) == ["torch.fake_installed (a value set and put back)"]
    assert installed_state.changes(True) == []  # (named once)


def test_a_change_installed_code_makes_itself_is_taken_as_the_new_state(kept):
    kept.limit = 4
    kept.registry = {"once": (1, "a")}
    kept.imported = functools  # (an installed module, as a lazy import sets it)
    assert installed_state.changes(True) == []
    kept.registry = {"once": (1, "a")}
    kept.other = [torch.relu]  # (a builtin in a container is read through: not plain)
    assert installed_state.changes(True) == ["torch.fake_installed.other"]


def test_a_module_or_class_of_the_students_is_not_installed_codes_own(kept, tmp_path, monkeypatch):
    students = types.ModuleType("students")
    students.__file__ = str(tmp_path / "students.py")
    monkeypatch.setitem(sys.modules, "students", students)
    kept.torch = students
    kept.Tensor = type("Tensor", (), {"__module__": "students"})
    assert installed_state.changes(False) == ["torch.fake_installed.torch", "torch.fake_installed.Tensor"]


def test_without_dictionary_versions_what_stays_changed_is_still_seen(kept, monkeypatch):
    monkeypatch.setattr(installed_state, "_read", None)
    kept.limit = functools.partial(torch.relu)
    assert installed_state.changes(False) == ["torch.fake_installed.limit"]
    kept.limit = functools.partial(torch.relu)
    kept.limit = 3
    assert installed_state.changes(True) == []  # (set and put back: not seen without versions)


def test_what_changed_before_the_students_code_is_settled(kept):
    kept.limit = functools.partial(torch.relu)  # (as the sandbox sets its own streams)
    installed_state.settle()
    assert installed_state.changes(True) == []


def test_an_installed_module_imported_later_is_kept_as_its_import_left_it(kept, tmp_path, monkeypatch):
    """torch imports some modules only when they are first used: one imported after `take` is kept as soon as its
    code has run; a module put into sys.modules under an installed package's name, not imported, is named."""
    import importlib
    folder = tmp_path / "site"
    (folder / "fake_pkg").mkdir(parents=True)
    (folder / "fake_pkg" / "__init__.py").write_text("")
    (folder / "fake_pkg" / "lazy.py").write_text("import torch\nrelu = torch.relu\n")
    monkeypatch.setattr(installed_state.provenance, "installed_file", lambda name: name.startswith(str(folder)))
    monkeypatch.syspath_prepend(str(folder))
    lazy = importlib.import_module("fake_pkg.lazy")
    assert installed_state.changes(True) == []  # (sys.modules holds what was imported: kept)
    lazy.relu = functools.partial(torch.relu)
    assert installed_state.changes(False) == ["fake_pkg.lazy.relu"]
    lazy.relu = torch.relu
    fake = types.ModuleType("torch.fake")
    monkeypatch.setitem(sys.modules, "torch.fake", fake)
    assert installed_state.changes(False) == ["sys.modules.torch.fake"]


def test_an_installed_functions_code_or_defaults_set_at_run_time_is_named_while_changed_and_once_put_back(kept,
                                                                                                        tmp_path,
                                                                                                        monkeypatch):
    """Setting a function's `__code__` or `__defaults__` leaves every dictionary as it was (the function is the
    same object): provenance's audit hook sees it (an audited event)."""
    import textwrap
    from torchgrade.sandbox import provenance
    provenance.watch(str(tmp_path) + os.sep, [])  # (the sandbox's audit hook: once per process)
    monkeypatch.setattr(installed_state, "_retargeted", {})
    monkeypatch.setattr(provenance, "retargeted", [])
    before = textwrap.indent.__defaults__
    try:
        textwrap.indent.__defaults__ = (functools.partial(bool),)
        assert installed_state.changes(False) == ["textwrap.indent.__defaults__"]
        assert installed_state.changes(False) == ["textwrap.indent.__defaults__"]  # (while it stays)
    finally:
        textwrap.indent.__defaults__ = before
    assert installed_state.changes(True) == ["textwrap.indent.__defaults__ (set and put back)"]
    assert installed_state.changes(True) == []


def test_a_variable_an_installed_closure_captured_set_to_what_installed_code_would_not_is_named(kept):
    """A decorator's wrapper calls what it captured: the dictionaries hold the same wrapper (tests/hostile has no
    target reached this way in this course; torch's boolean dispatchers and wrappers are of this kind)."""
    cell = kept.managed.__closure__[0]
    cell.cell_contents = functools.partial(iter, [None])
    assert installed_state.changes(False) == ["contextlib.helper's captured func"]
    cell.cell_contents = lambda: iter([None])  # (a Python function: what it runs is watched)
    assert installed_state.changes(False) == []


def test_the_graders_own_line_trace_in_threading_is_not_a_change_of_the_students(kept):
    """`torchgrade audit` traces lines (linetrace.LineTrace sets threading's trace hook around a request)."""
    import threading
    from torchgrade.sandbox.linetrace import LineTrace
    with LineTrace("/nowhere/") as trace:
        assert threading._trace_hook is not None and installed_state.changes(True) == [], trace
    assert installed_state.changes(True) == []
