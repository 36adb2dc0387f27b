"""Grade the same class two ways in one run and compare: torchgrade's batch, and one pytest per submission.

    python benchmarks/class_benchmark.py                 # 24 submissions, -j 2, the whole assignment
    python benchmarks/class_benchmark.py -n 48 -j 2 --skip-naive --keep reports/bench

The class is made from the reference solutions and the stubs: each student's module is the
reference (right) or the stub (not done) at random (seeded), with a comment naming the student so
that no two submissions are the same files. Both ways grade the whole assignment (visible and
hidden checks, every device available) from a cold start, as an instructor would run them:

- naive: `python -m pytest -c torchgrade/checks.ini graders/checks --submission DIR
  --results-json OUT`, one fresh process per submission, one after the other (`--naive-jobs 2`:
  two at a time);
- torchgrade: `torchgrade grade CLASS --out DIR -j N`, one process.

It prints submissions per minute for each and their ratio, checks that both gave every student the
same score, and prints where the batch's check time goes, per exercise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from torchgrade.config import load_assignment  # noqa: E402
from torchgrade.grading import CHECKS_INI  # noqa: E402

#: Targets for the whole assignment on a 2-core machine (issue: class-scale grading).
TARGET_PER_MINUTE = 60.0
TARGET_RATIO = 8.0


def make_class(folder: Path, count: int, done: float, seed: int) -> dict[str, list[str]]:
    """`count` submission folders; returns which modules each student finished."""
    assignment = load_assignment(ROOT / "assignment.yaml")
    rng = random.Random(seed)
    finished = {}
    for i in range(count):
        name = f"student{i:03d}"
        (folder / name).mkdir(parents=True)
        finished[name] = []
        for exercise in assignment.exercises:
            right = rng.random() < done
            source = (assignment.reference_dir if right else assignment.stubs_dir) / f"{exercise.name}.py"
            text = source.read_text(encoding="utf-8") + f"\n# {name}\n"
            (folder / name / f"{exercise.name}.py").write_text(text, encoding="utf-8")
            if right:
                finished[name].append(exercise.name)
    return finished


def naive(class_dir: Path, out: Path, jobs: int = 1) -> tuple[float, dict[str, float]]:
    """One fresh pytest per submission, `jobs` at a time; the seconds taken and each student's score."""
    out.mkdir(parents=True)

    def one(folder: Path) -> None:
        subprocess.run([sys.executable, "-m", "pytest", "-c", str(CHECKS_INI), "--rootdir", "graders/checks", "graders/checks",
                        "--submission", str(folder), "--results-json", str(out / f"{folder.name}.json"), "-q",
                        "-p", "no:cacheprovider"],
                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    folders = sorted(class_dir.iterdir())
    started = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, folders))
    seconds = time.perf_counter() - started
    return seconds, {f.name: json.loads((out / f"{f.name}.json").read_text())["score"] for f in folders}


def batch(class_dir: Path, out: Path, jobs: int) -> tuple[float, dict[str, float], list[dict]]:
    """`torchgrade grade` on the whole class; the seconds taken, each student's score, the ledger."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from torchgrade.cli import main; main()", "grade", str(class_dir),
                    "--out", str(out), "-j", str(jobs), "--no-progress"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    records = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    return seconds, {r["name"]: r["score"] for r in records}, records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--submissions", type=int, default=24, help="class size (default 24)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="torchgrade worker processes (default 2)")
    parser.add_argument("--done", type=float, default=0.7, help="chance a module is finished (default 0.7)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--naive-jobs", type=int, default=1,
                        help="naive pytest processes at a time (default 1: one after the other)")
    parser.add_argument("--skip-naive", action="store_true", help="only time torchgrade's batch")
    parser.add_argument("--keep", type=Path, help="keep the class and both outputs in this folder")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="torchgrade-bench-"))
    try:
        class_dir = work / "class"
        finished = make_class(class_dir, args.submissions, args.done, args.seed)
        modules = statistics.fmean(len(v) for v in finished.values())
        print(f"load average before (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(f"class: {args.submissions} submissions, {modules:.1f} of "
              f"{len(load_assignment(ROOT / 'assignment.yaml').exercises)} modules finished on average")

        batch_s, batch_scores, records = batch(class_dir, work / "batch", args.jobs)
        batch_rate = args.submissions / batch_s * 60
        print(f"torchgrade grade -j {args.jobs}: {batch_s:7.1f} s  {batch_rate:7.1f} submissions/min")
        if not args.skip_naive:
            naive_s, naive_scores = naive(class_dir, work / "naive", args.naive_jobs)
            naive_rate = args.submissions / naive_s * 60
            print(f"naive (one pytest each, {args.naive_jobs} at a time): {naive_s:7.1f} s  "
                  f"{naive_rate:7.1f} submissions/min")
            print(f"ratio: {batch_rate / naive_rate:.1f}x")
            differ = {n: (naive_scores[n], batch_scores.get(n)) for n in naive_scores if naive_scores[n] != batch_scores.get(n)}
            print("scores: the same both ways" if not differ else f"scores DIFFER (naive, batch): {differ}")
        per: dict[str, float] = {}
        for r in records:
            for exercise, seconds in r["exercise_seconds"].items():
                per[exercise] = per.get(exercise, 0.0) + seconds
        total = sum(per.values()) or 1.0
        print("batch check time per submission, by exercise (one worker's seconds):")
        for exercise, seconds in sorted(per.items(), key=lambda kv: -kv[1]):
            print(f"  {exercise:<10} {seconds / len(records):6.3f} s  {100 * seconds / total:5.1f}%")
        overhead = statistics.fmean(r["seconds"] - sum(r["exercise_seconds"].values()) for r in records)
        print(f"  {'(session)':<10} {overhead:6.3f} s  per submission outside the checks (setup, sandbox teardown)")
        print(f"load average at the end (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} cores (other work on the machine slows both ways)")
        ok = batch_rate >= TARGET_PER_MINUTE and (args.skip_naive or batch_rate / naive_rate >= TARGET_RATIO)
        print(f"targets (>= {TARGET_PER_MINUTE:g}/min, >= {TARGET_RATIO:g}x naive): {'met' if ok else 'NOT met'}")
        return 0
    finally:
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
