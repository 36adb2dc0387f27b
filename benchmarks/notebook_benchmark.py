"""The in-notebook check's cells in a real kernel: the first (it starts the kernel's warm checker) and the
later ones (served by it), against the naive way, a fresh `torchgrade check` process per check cell (what
every cell cost before the warm checker).

    python benchmarks/notebook_benchmark.py [--cells 4]

It writes a course with `torchgrade init --notebook` and its bundle (`bundle --notebook`) into a temporary
folder, answers the bundle's notebook wrongly (|x| for relu, so that checks fail and print their messages),
and runs it in an ipykernel (nbclient) with `--cells` check cells `%torchgrade check activations.relu`. A
cell's time is nbclient's record of it (the kernel's execute_input to its execute_reply). The naive way:
`python -m torchgrade.cli check activations.relu --path DIR` on the same notebook saved, `--cells` times
in a row, each a process of its own. Needs ipykernel and nbclient (the test extra).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WRONG = "def relu(x):\n    return x.abs()"


def _seconds(cell) -> float:
    record = cell.metadata["execution"]
    start, end = (datetime.fromisoformat(record[k].replace("Z", "+00:00"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - start).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=4, help="check cells in the notebook (and naive runs)")
    args = parser.parse_args()

    import nbclient
    import nbformat
    from click.testing import CliRunner
    from nbformat import v4

    from torchgrade.cli import main as cli

    work = Path(tempfile.mkdtemp(prefix="notebook-benchmark-"))
    course = work / "course"
    assert CliRunner().invoke(cli, ["init", str(course), "--notebook"]).exit_code == 0
    made = CliRunner().invoke(cli, ["bundle", "--notebook", "--out", str(work / "dist"),
                                    "--assignment", str(course / "assignment.yaml")])
    assert made.exit_code == 0, made.output
    bundle = work / "dist" / "student"
    node = nbformat.read(bundle / "notebooks" / "activations.ipynb", as_version=4)
    next(c for c in node.cells if c.cell_type == "code" and "def relu" in c.source).source = WRONG
    checks = [c for c in node.cells if c.source.startswith("%torchgrade check")]
    for _ in range(args.cells - len(checks)):
        node.cells.append(v4.new_code_cell("%torchgrade check activations.relu"))
    spec = work / "jupyter" / "kernels" / "bench"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "bench", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(work / "jupyter")
    started = time.perf_counter()
    nbclient.NotebookClient(node, kernel_name="bench", timeout=600,
                            resources={"metadata": {"path": str(bundle)}}).execute()
    whole = time.perf_counter() - started
    cells = [_seconds(c) for c in node.cells if c.cell_type == "code" and c.source.startswith("%torchgrade check")]
    for cell in node.cells:
        shown = [o for o in cell.get("outputs", []) if o.output_type == "execute_result"]
        assert not shown or "matches torch relu" in shown[0].data["text/plain"], shown[0].data["text/plain"]

    saved = work / "saved"
    saved.mkdir()
    nbformat.write(node, saved / "activations.ipynb")
    naive = []
    for _ in range(args.cells):
        begun = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "torchgrade.cli", "check", "activations.relu", "--path", str(saved),
                               "--report", str(work / "naive")], cwd=bundle, capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(bundle)), stdin=subprocess.DEVNULL)
        naive.append(time.perf_counter() - begun)
        assert done.returncode == 1, done.stdout + done.stderr
    later = statistics.median(cells[1:]) if len(cells) > 1 else float("nan")
    print(f"check cells in one kernel (warm checker): first {cells[0]:.2f} s, then "
          f"{', '.join(f'{s:.2f}' for s in cells[1:])} s (median {later:.2f} s); whole notebook {whole:.1f} s")
    print(f"a fresh `torchgrade check` process per cell (naive): {', '.join(f'{s:.2f}' for s in naive)} s "
          f"(median {statistics.median(naive):.2f} s)")
    print(f"a later cell takes {later / statistics.median(naive):.2f} times the naive cell's time; load average "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
