"""The assignment file: parsed once, validated with messages that say where, documented in docs/authoring.md."""

import re

import pytest

from torchgrade.engine.config import EXERCISE_KEYS, TARGET_KEYS, TOP_KEYS, ConfigError, load_assignment

from conftest import ROOT


def write(tmp_path, text):
    path = tmp_path / "assignment.yaml"
    path.write_text(text)
    return path


def test_the_bundled_assignment_covers_every_module_of_the_catalogue(assignment):
    catalogue = (ROOT.parent / "shared" / "exercises.md").read_text()
    modules = re.findall(r"^## (\w+)\.py", catalogue, flags=re.M)
    assert sorted(e.name for e in assignment.exercises) == sorted(modules)
    assert assignment.max_score == 100


def test_points_and_limits_resolve_target_then_exercise_then_top(tmp_path):
    a = load_assignment(write(tmp_path, """
        time_limit: 7
        exercises:
          tensors:
            time_limit: 3
            forbidden: [clone]
            targets:
              view: {points: 4, time_limit: 1, forbidden: [reshape]}
              gather: 2
          conv:
            targets: {corr2d: 1.5}
    """))
    assert a.target("tensors", "view").time_limit == 1
    assert a.target("tensors", "gather").time_limit == 3
    assert a.target("conv", "corr2d").time_limit == 7
    assert a.target("tensors", "view").forbidden == ("clone", "reshape")
    assert a.max_score == 7.5


@pytest.mark.parametrize("text, message", [
    ("exercises:\n  tensors:\n    targets:\n      view: {pionts: 3}\n",
     "assignment.yaml: exercises.tensors.targets.view.pionts: unknown key 'pionts' (did you mean 'points'?)"),
    ("exercises:\n  tensors:\n    targets:\n      view: abc\n",
     "assignment.yaml: exercises.tensors.targets.view.points: expected a number >= 0, got 'abc'"),
    ("time_limt: 3\nexercises: {}\n", "unknown key 'time_limt' (did you mean 'time_limit'?)"),
    ("exercises:\n  tensors:\n    visibility: secret\n    targets: {view: 1}\n", "expected visible or hidden, got 'secret'"),
    ("exercises: [1, 2\n", "assignment.yaml line 2: not valid YAML"),
    ("exercises:\n  tensors:\n    targets:\n      view: {points: 1, forbidden: view}\n", "expected a list of call names"),
], ids=["typo", "not-a-number", "top-level-typo", "visibility", "bad-yaml", "forbidden-not-a-list"])
def test_mistakes_are_reported_with_where_and_what(tmp_path, text, message):
    with pytest.raises(ConfigError) as error:
        load_assignment(write(tmp_path, text))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read assignment file"):
        load_assignment(tmp_path / "nope.yaml")


def test_every_key_is_documented_in_the_authors_guide():
    guide = (ROOT / "docs" / "authoring.md").read_text()
    for key in {**TOP_KEYS, **EXERCISE_KEYS, **TARGET_KEYS}:
        assert f"| `{key}` |" in guide, f"assignment key {key!r} is not documented in docs/authoring.md"
