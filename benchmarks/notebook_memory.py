"""The grading process's peak memory and time on a class holding the hostile notebooks, against an honest class.

    python benchmarks/notebook_memory.py [--copies 3] [--tree PATH ...] [--isolation bwrap]

Two classes: `--copies` copies of the reference (honest), and the same with three more submissions, each
the reference with one module a notebook of tests/hostile/notebooks.py (`autograd`: a 5 MB literal;
`functions`: 5000 cells with 340,000 outputs; `tensors`: JSON nested 50,000 deep). Each is
graded by `torchgrade grade --jobs 1` (the grading process reads the notebooks itself; the sandbox's
processes are not counted) of each `--tree` (a checkout of torchgrade, e.g. `git archive <commit>`;
default: this one), with this interpreter; the figure is that process's own peak RSS (getrusage). The
issue's bound: the hostile class within 1.5 times the honest one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hostile import notebooks  # noqa: E402

#: Run in the child: the CLI with this tree first on the path, then its own peak RSS (KiB) on the last line.
CHILD = """
import resource, sys
from torchgrade.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    print("PEAK_KIB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
"""


def make_class(folder: Path, copies: int, hostile: bool) -> Path:
    for i in range(copies):
        shutil.copytree(ROOT / "reference", folder / f"honest{i}", ignore=shutil.ignore_patterns("__pycache__"))
    for attack, module in notebooks.NOTEBOOKS.items() if hostile else ():  # one submission each: one stops none
        shutil.copytree(ROOT / "reference", folder / attack, ignore=shutil.ignore_patterns("__pycache__"))
        (folder / attack / f"{module}.py").unlink()
        (folder / attack / f"{module}.ipynb").write_text(notebooks.BUILD[attack](module))
    return folder


def grade(tree: Path, folder: Path, out: Path, isolation: str) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of one `torchgrade grade` of `folder` by the torchgrade in `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "TORCHGRADE_ISOLATION": isolation}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, "grade", str(folder), "--out", str(out), "--jobs", "1",
                           "--device", "cpu", "--assignment", str(tree / "assignment.yaml"), "--no-progress",
                           "--isolation", isolation], env=env, capture_output=True, text=True, cwd=tree)
    seconds = time.perf_counter() - start
    peak = [line for line in done.stdout.splitlines() if line.startswith("PEAK_KIB")]
    if not peak:
        raise SystemExit(f"{tree}: no figure\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return int(peak[-1].split()[1]) / 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", help="a torchgrade checkout (default: this one)")
    parser.add_argument("--isolation", default="bwrap")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        honest = make_class(Path(tmp) / "honest", args.copies, hostile=False)
        hostile = make_class(Path(tmp) / "hostile", args.copies, hostile=True)
        for tree in args.tree or [ROOT]:
            tree = tree.resolve()
            figures = {}
            for name, folder in (("honest", honest), ("hostile", hostile)):
                out = Path(tmp) / f"out-{len(rows)}-{name}"
                figures[name] = grade(tree, folder, out, args.isolation)
            scores = {}
            for attack in notebooks.NOTEBOOKS:  # what each hostile notebook's submission got, and at which level
                document = json.loads((out / attack / "results.json").read_text())
                scores[attack] = (document["score"], document["extra_data"].get("isolation"))
            (hm, hs), (xm, xs) = figures["honest"], figures["hostile"]
            rows.append(f"{tree}: honest class {hm:.0f} MiB {hs:.0f} s; with the hostile notebooks {xm:.0f} MiB "
                        f"{xs:.0f} s ({xm / hm:.2f} times the memory); their submissions' scores: {scores}")
            print(rows[-1], flush=True)


if __name__ == "__main__":
    main()
