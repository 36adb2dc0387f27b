"""The engine end to end: the reference scores full marks, the stubs zero, wrong code loses its own points."""

import pytest

from torchgrade.engine.grading import grade_submission

from conftest import ROOT, failures, lost_targets, points_by_target

MODULES = ("tensors", "conv")


@pytest.mark.parametrize("module", MODULES)
def test_reference_scores_full_marks(assignment, module):
    """On every device: CUDA, or without it the CUDA stand-in (no finding on the reference)."""
    g = grade_submission(ROOT / "reference", assignment, device="all", only=(module,))
    assert g.max_score == pytest.approx(assignment.exercise(module).points)
    assert g.score == g.max_score, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]


@pytest.mark.parametrize("module", MODULES)
def test_untouched_stubs_score_zero(assignment, module):
    g = grade_submission(ROOT / "exercises", assignment, device="all", only=(module,))
    assert g.score == 0
    assert g.max_score == pytest.approx(assignment.exercise(module).points)
    assert all("not implemented yet" in t.output for t in g.tests if t.status == "failed")


def test_cuda_variants_are_skipped_with_the_reason_and_carry_no_points(assignment, monkeypatch):
    """Where the CUDA stand-in is off (cuda_standin: off; tests/test_standin.py for the others)."""
    monkeypatch.setenv("TORCHGRADE_CUDA_STANDIN", "off")
    g = grade_submission(ROOT / "reference", assignment, device="all", only=("tensors.one_hot",))
    cuda = [t for t in g.tests if t.device == "cuda"]
    assert cuda and all(t.status == "skipped" and t.max_score == 0 for t in cuda)
    assert all("CUDA is not available" in t.output for t in cuda)
    assert g.score == g.max_score == assignment.target("tensors", "one_hot").points
    assert g.devices == ["cpu"]


def test_a_wrong_view_loses_exactly_the_points_of_view(grade):
    g = grade(only=("tensors",), append={"tensors": """
        def view(x, *shape):
            return torch.as_strided(x, (x.numel(),), (1,)).new_tensor(x.flatten().tolist()).view(*shape)
    """})
    assert lost_targets(g) == {"tensors.view"}
    message = failures(g, "tensors.view")[0]
    assert message.startswith("forbidden call: view may not use `view`")
    assert "`x.flatten`" in message and "tensors.py line" in message


def test_a_copy_instead_of_a_view_fails_on_storage_sharing(grade):
    g = grade(only=("tensors.view",), append={"tensors": """
        def view(x, *shape):
            out = torch.empty(0, dtype=x.dtype, device=x.device)
            return _view_copy(x, shape)

        def _view_copy(x, shape):
            import math
            flat = torch.tensor(x.tolist(), dtype=x.dtype).flatten()
            return torch.as_strided(flat, _reference_view(x, *shape).shape, _reference_view(x, *shape).stride())

        _reference_view = view
    """})
    messages = failures(g, "tensors.view")
    assert messages, "a copy must not pass as a view"
    assert lost_targets(g) == {"tensors.view"}


def test_scatter_that_returns_a_new_tensor_is_caught(grade):
    g = grade(only=("tensors.scatter_",), append={"tensors": """
        _in_place = scatter_

        def scatter_(target, dim, index, src):
            return _in_place(target.clone(), dim, index, src)
    """})
    assert lost_targets(g) == {"tensors.scatter_"}
    messages = failures(g, "tensors.scatter_")
    assert any("['returned_the_target_itself']: expected True, got False" in m for m in messages)


def test_import_crash_costs_only_that_file(grade, assignment):
    g = grade(only=("tensors", "conv"), replace={"tensors": [("import torch\n", "import torch\nraise ImportError('oops')\n")]})
    assert lost_targets(g) == {t.qualname for t in assignment.exercise("tensors").targets}
    assert all("could not be imported (ImportError)" in m for m in failures(g, "tensors.view"))
    assert all(t.status == "error" for t in g.tests if t.exercise == "tensors" and t.status != "skipped")


def test_a_missing_file_costs_only_its_exercises(grade):
    g = grade(only=("tensors", "conv"), drop=("conv",))
    assert {t.split(".")[0] for t in lost_targets(g)} == {"conv"}
    assert failures(g, "conv.corr2d")[0] == "conv.py is missing: its 18 points are not graded"


def test_a_missing_name_costs_only_that_target(grade):
    g = grade(only=("tensors",), replace={"tensors": [("def gather(", "def gather_renamed(")]})
    assert lost_targets(g) == {"tensors.gather"}
    assert "tensors.py defines no `gather`" in failures(g, "tensors.gather")[0]


def test_a_broken_pytest_plugin_installed_beside_torchgrade_does_not_stop_grading(tmp_path):
    """A student's environment may hold any pytest plugin (platformdirs registers one); the course's checks
    need torchgrade's alone, so one that fails to import is not loaded."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    (site / "broken_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "broken_plugin-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (site / "broken_plugin-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\nbroken = broken_plugin\n")
    (site / "broken_plugin.py").write_text("raise ImportError('this plugin is broken')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "torchgrade.cli", "check", "tensors.broadcast_shape", "--path",
                           "reference", "--device", "cpu", "--report", str(tmp_path / "report")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and "100%" in done.stdout, done.stdout + done.stderr[-2000:]
