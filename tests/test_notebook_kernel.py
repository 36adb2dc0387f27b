"""The in-notebook check in a real Jupyter kernel (ipykernel, driven by nbclient): one kernel, one notebook.

A student's notebook runs its cells, then `%load_ext torchgrade` and `%torchgrade check tensors`; the
verdicts shown inline must be those `torchgrade check` gives the same cells saved as a notebook, and the
kernel's own state (its modules, its path, its folder, its variables) must be as it was."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
from nbformat import v4

from class_folders import REFERENCE
from tiny_course import make_course

nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

BROKEN = "def broadcast_shape(*shapes):\n    shape = list(shapes[0])\n    raise ValueError('not yet')"
#: What the check must leave as it was: the path, the folder, the student's objects and values, torch's settings.
STATE = ("import json, os, sys\n"
         "STATE = json.dumps([sys.path, os.getcwd(), id(broadcast_shape), id(one_hot), x.tolist(), id(torch),\n"
         "                    str(torch.get_default_dtype()), torch.initial_seed(), torch.get_num_threads()])")


def _kernel_spec(where) -> str:
    """A kernel spec for this Python (the one whose torchgrade is being tested), found through JUPYTER_PATH."""
    spec = where / "kernels" / "torchgrade-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "torchgrade test", "language": "python"}))
    return "torchgrade-test"


def test_the_check_in_a_kernel_shows_the_verdicts_of_torchgrade_check_and_leaves_the_kernel_as_it_was(
        tmp_path, monkeypatch):
    course = make_course(tmp_path / "course")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("TORCHGRADE_LANG", raising=False)
    kernel = _kernel_spec(tmp_path / "jupyter")
    student = ["import torch", REFERENCE, "%%time\nx = torch.zeros(3)", BROKEN]
    cells = [*student, STATE, "%load_ext torchgrade",
             "verdicts = %torchgrade check tensors --device cpu\nverdicts",
             "import torchgrade.notebook\nagain = torchgrade.notebook.check('tensors.one_hot', device='cpu')",
             STATE.replace("STATE =", "AFTER ="),
             "print(json.dumps({'rows': [[r['name'], r['status'], r['score']] for r in verdicts.rows],\n"
             "                  'outputs': [r['output'] for r in verdicts.rows], 'status': verdicts.status,\n"
             "                  'again': [[r['name'], r['status']] for r in again.rows],\n"
             "                  'same_state': STATE == AFTER and not {'tensors', 'visible', 'pytest'} & set(sys.modules)}))"]
    node = v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(node, kernel_name=kernel, timeout=300,
                            resources={"metadata": {"path": str(tmp_path / "course")}}).execute()
    shown = [o for o in node.cells[6].outputs if o.output_type == "execute_result"]
    assert shown and "torchgrade-check" in shown[0].data["text/html"]  # the HTML summary, inline
    assert "broadcast_shape" in shown[0].data["text/plain"]  # and its text fallback
    printed = json.loads(node.cells[-1].outputs[0].text)
    assert printed["same_state"], "the check changed the kernel's modules, path, folder or variables"

    # The same cells, saved as a notebook and checked from a terminal.
    saved = tmp_path / "saved"
    saved.mkdir()
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(c) for c in student]), saved / "tensors.ipynb")
    done = subprocess.run([sys.executable, "-m", "torchgrade.cli", "check", "tensors", "--device", "cpu", "--path",
                           str(saved), "--assignment", str(course), "--report", str(tmp_path / "report")],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    terminal = json.loads((tmp_path / "report" / "results.json").read_text())
    assert printed["rows"] == [[t["name"], t["status"], t["score"]] for t in terminal["tests"]], printed["outputs"]
    assert printed["status"] == 1 and ["tensors.broadcast_shape: matches torch broadcast shapes", "failed"] \
        in [row[:2] for row in printed["rows"]]
    assert [row for row in printed["rows"] if row[0].startswith("tensors.one_hot")] and \
        printed["again"] == [row[:2] for row in printed["rows"] if row[0].startswith("tensors.one_hot")]
    # the failure names the cell as the kernel numbered it, and the saved notebook's cell likewise
    failure = next(o for o in printed["outputs"] if "not yet" in o)
    assert 'File "tensors.ipynb", In [4], line 3, in broadcast_shape' in failure
    saved_failure = next(t["output"] for t in terminal["tests"] if "not yet" in t["output"])
    assert saved_failure == failure.replace("In [4]", "cell 4")
