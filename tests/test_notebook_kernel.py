"""The in-notebook check in a real Jupyter kernel (ipykernel, driven by nbclient): one kernel, one notebook.

A student's notebook runs its cells, then `%load_ext torchgrade` and `%torchgrade check tensors`; the
verdicts shown inline must be those `torchgrade check` gives the same cells saved as a notebook, and the
kernel's own state (its modules, its path, its folder, its variables) must be as it was."""

from __future__ import annotations

import json
import re
import os
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


#: The module's name as a .py file (not inside a check file's name, test_activations.py).
PY_NAME = re.compile(r"(?<![\w/.])activations\.py\b")
#: The student's answer in the course's notebook: wrong (|x| is not relu), and it prints while imported.
WRONG_RELU = 'print("hello from the notebook")\n\n\ndef relu(x):\n    return x.abs()'
#: After a check cell: which warm checker served it, how many checks it had served, and its rows.
SERVED = ("# skip-grading\nimport json as _json\n"
          "print(_json.dumps({'checker': _.checker, 'served': _.served, 'rows': [[r['name'], r['status']] for r in _.rows]}))")


@pytest.mark.heavy
def test_a_notebook_course_from_init_to_a_students_kernel_says_no_wrong_word(tmp_path, monkeypatch):
    """The author's path (`init --notebook`, `bundle --notebook --verify`) and the student's (the bundle's
    notebook in a real kernel, two check cells, each printed rerun line run where it was printed), then the
    instructor's report of the handed-in notebook and its rerun lines run in the student's folder."""
    import time

    import psutil
    from click.testing import CliRunner

    from torchgrade.cli import main

    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("TORCHGRADE_LANG", raising=False)
    kernel = _kernel_spec(tmp_path / "jupyter")
    course, dist = tmp_path / "course", tmp_path / "dist"
    made = CliRunner().invoke(main, ["init", str(course), "--notebook"])
    assert made.exit_code == 0, made.output
    built = CliRunner().invoke(main, ["bundle", "--notebook", "--verify", "--out", str(dist),
                                      "--assignment", str(course / "assignment.yaml")])
    assert built.exit_code == 0, built.output
    # item 6: it says it verified, and bundle.json names the stand-in its CUDA outcomes were recorded on
    assert built.output.startswith("verified: the reference, graded through the sandbox as a submission, passed all")
    bundle = dist / "student"
    assert json.loads((bundle / "bundle.json").read_text())["recorded_on"] == ["cpu", "cuda (stand-in)"]
    # item 5: the README, in both languages, names the notebook workflow and pyproject.toml's torch range
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    english, chinese = readme.split("## 中文说明")
    torch_spec = next(r for r in re.findall(r'"([^"]+)"', (bundle / "pyproject.toml").read_text())
                      if re.match(r"torch\W", r))
    assert torch_spec == "torch>=2.7"
    for text, newer in ((english, "torch 2.7 or newer"), (chinese, "torch 2.7 或更新版本")):
        assert "`notebooks/activations.ipynb`" in text and "torchgrade check --path notebooks" in text, text
        assert "%load_ext torchgrade" in text and "%torchgrade check activations.relu" in text and newer in text
    assert "2.4" not in readme

    # The student: the bundle's notebook, its stub answered wrongly, a second check cell, in a kernel in the bundle.
    node = nbformat.read(bundle / "notebooks" / "activations.ipynb", as_version=4)
    stub = next(c for c in node.cells if c.cell_type == "code" and "def relu" in c.source)
    stub.source = WRONG_RELU
    node.cells += [v4.new_code_cell(SERVED), v4.new_code_cell("%torchgrade check activations"),
                   v4.new_code_cell(SERVED)]
    client = nbclient.NotebookClient(node, kernel_name=kernel, timeout=300,
                                     resources={"metadata": {"path": str(bundle)}})

    def run(source: str) -> list:
        node.cells.append(v4.new_code_cell(source))
        client.execute_cell(node.cells[-1], len(node.cells) - 1)
        return node.cells[-1].outputs

    def served(outputs: list) -> dict:
        return json.loads(next(o for o in outputs if o.output_type == "stream").text)

    with client.setup_kernel():
        for index, cell in enumerate(node.cells):
            client.execute_cell(cell, index)
        checks = [c for c in node.cells if c.cell_type == "code" and c.source.startswith("%torchgrade check")]
        shown = [o for c in checks for o in c.outputs if o.output_type == "execute_result"]
        assert len(shown) == 2
        first, second = (served(c.outputs) for c in node.cells if c.cell_type == "code" and c.source == SERVED)
        # item 10: the second check cell is served by the warm checker the first one started
        assert first["checker"] == second["checker"] and (first["served"], second["served"]) == (1, 2)
        assert psutil.pid_exists(first["checker"])
        assert ["activations.relu: matches torch relu on random input [cpu]", "failed"] in first["rows"]
        # item 2: every rerun line shown, run as printed in this kernel, runs that one check on the student's code
        texts = {line for o in shown for line in re.findall(r"rerun: (.+)", o.data["text/plain"])}
        html_reruns = {line for o in shown for line in re.findall(r"rerun: <code[^>]*>([^<]+)</code>", o.data["text/html"])}
        assert texts and texts <= html_reruns, (texts, html_reruns)  # the text: each target's first failure
        for line in sorted(html_reruns):
            assert line.startswith("%torchgrade check activations.relu::test_"), line
            again = run(line)
            rows = served(run(SERVED))["rows"]
            assert len(rows) == 1 and rows[0][1] == "failed" and line.split("::")[1].split()[0] in \
                next(o for o in again if o.output_type == "execute_result").data["text/plain"], (line, rows)
        # item 4: no message of the kernel's says activations.py; what the notebook printed is the notebook's
        said = [o.data.get("text/plain", "") + o.data.get("text/html", "") for c in node.cells
                for o in c.get("outputs", []) if o.output_type == "execute_result"]
        assert said and not [PY_NAME.search(t) for t in said if PY_NAME.search(t)]
        assert "activations.ipynb" in said[0] and "printed by activations.ipynb while importing" in said[0], said[0]
        # item 10: a change to the course's files starts a fresh checker for the next check
        with open(bundle / "graders" / "hints.yaml", "a", encoding="utf-8") as hints:
            hints.write("# changed by the author\n")
        run("%torchgrade check activations.relu")
        restarted = served(run(SERVED))
        assert restarted["checker"] != first["checker"] and restarted["served"] == 1
        assert not psutil.pid_exists(first["checker"]) or psutil.Process(first["checker"]).status() == "zombie"
    deadline = time.monotonic() + 30  # the kernel is shut down: its checker ends with it
    while psutil.pid_exists(restarted["checker"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not psutil.pid_exists(restarted["checker"]), "the warm checker outlived its kernel"

    # The instructor grades the handed-in notebook; the report's rerun lines, run in the student's folder.
    handed_in = tmp_path / "class" / "alice"
    handed_in.mkdir(parents=True)
    nbformat.write(node, handed_in / "activations.ipynb")
    nbformat.write(node, bundle / "notebooks" / "activations.ipynb")  # the student saved it where it came from
    graded = subprocess.run([sys.executable, "-m", "torchgrade.cli", "grade", str(handed_in), "--out", str(tmp_path / "out"),
                             "--device", "cpu", "--assignment", str(course / "assignment.yaml")],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    page = (tmp_path / "out" / "alice" / "report.html").read_text(encoding="utf-8")
    results = (tmp_path / "out" / "alice" / "results.json").read_text(encoding="utf-8")
    assert not PY_NAME.search(page) and not PY_NAME.search(results), (PY_NAME.search(page), PY_NAME.search(results))
    assert "<code>activations.ipynb</code>" in page
    import html

    report_reruns = sorted({html.unescape(r) for r in re.findall(r"<code>(torchgrade check [^<]+)</code>", page)})
    assert report_reruns and all(r.endswith("--device cpu --path notebooks") for r in report_reruns), report_reruns
    env = {k: v for k, v in os.environ.items() if k != "TORCHGRADE_LANG"}
    env["PYTHONPATH"] = str(bundle)  # the bundle's own engine, as `pip install .` there gives
    for number, rerun in enumerate(report_reruns):  # each as printed, but for the installed command's name
        command = rerun.replace("torchgrade check", f"{sys.executable} -m torchgrade.cli check", 1)
        again = subprocess.run(["bash", "-c", f"{command} --report {tmp_path / f'again{number}'}"], cwd=bundle,
                               env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
        assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
        one = json.loads((tmp_path / f"again{number}" / "results.json").read_text())
        assert len(one["tests"]) == 1 and one["tests"][0]["status"] == "failed", one["tests"]
        assert rerun.split("::")[1].split()[0].removeprefix("test_").replace("_", " ") in one["tests"][0]["name"]
        assert not PY_NAME.search(again.stdout + again.stderr) and "activations.ipynb" in again.stdout
