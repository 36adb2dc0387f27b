"""The CUDA stand-in against a real GPU: the same submissions graded both ways, findings side by side.

    python benchmarks/standin_vs_gpu.py [--jobs N] [--json PATH]

Grades the reference (module by module) and every submission of the fairness corpus
(tests/fairness/<module>/*.py, appended to the reference as tests/test_fairness.py does) on every
device, twice: in worker processes that see the GPU (CUDA checks on CUDA), and in worker processes
with ``CUDA_VISIBLE_DEVICES=""`` and ``TORCHGRADE_CUDA_STANDIN=score`` (the same CUDA checks on the
stand-in, as on a machine without a GPU). It prints, per submission and target, the CUDA checks each
way lost, the checks the stand-in set aside, and whether the two agree; then a summary. On a machine
without CUDA only the stand-in column is filled, with the corpus's own ``# on cuda: loses`` line
(what a GPU was seen to do) beside it. Exit status 1 when the stand-in disagrees with the GPU (or,
without a GPU, with a corpus line), else 0.

Sized for a 16-core GPU machine in under 4 minutes (--jobs 6 per side by default: 12 processes).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures as futures
import json
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fairness"


def _worker_setup(standin: bool) -> None:
    """Before torch is imported: hide the GPU from a stand-in worker, and force the stand-in on."""
    if standin:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ["TORCHGRADE_CUDA_STANDIN"] = "score"
    sys.path.insert(0, str(ROOT))


def _check_id(nodeid: str) -> str:
    """``hidden/test_conv.py::test_x[case-cuda]`` -> ``test_x[case]`` (as tests/test_fairness.py names checks)."""
    name = nodeid.split("::")[-1]
    found = re.fullmatch(r"(\w+)(?:\[(.*)\])?", name)
    inner = re.sub(r"(^|-)(cpu|cuda)(?=-|$)", "", found.group(2) or "").strip("-")
    return f"{found.group(1)}[{inner}]" if inner else found.group(1)


def _grade(job: tuple[str, str, str | None]) -> dict:
    """Grade one (name, module, corpus file or None) on every device; the CUDA checks' outcomes."""
    import torch

    from torchgrade.engine.config import load_assignment
    from torchgrade.engine.grading import grade_submission

    name, module, corpus_file = job
    assignment = load_assignment(ROOT / "assignment.yaml")
    folder = Path(tempfile.mkdtemp(prefix="standin-vs-gpu-"))
    try:
        for path in (ROOT / "reference").glob("*.py"):
            shutil.copy(path, folder / path.name)
        if corpus_file:
            target = folder / f"{module}.py"
            target.write_text(target.read_text() + "\n\n" + Path(corpus_file).read_text())
        started = time.perf_counter()
        g = grade_submission(folder, assignment, device="all", only=(module,))
        seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    checks = {}
    for t in g.tests:
        if t.device in ("cpu", "cuda"):
            checks[f"{t.device}|{t.target}|{_check_id(t.nodeid)}"] = [t.status, t.output[:2000] if t.output else ""]
    return {"name": name, "module": module, "cuda": torch.cuda.is_available(), "standin": g.standin,
            "seconds": round(seconds, 1), "checks": checks}


def _jobs() -> list[tuple[str, str, str | None]]:
    sys.path.insert(0, str(ROOT))
    from torchgrade.engine.config import load_assignment

    modules = [e.name for e in load_assignment(ROOT / "assignment.yaml").exercises]
    jobs = [(f"reference", m, None) for m in modules]
    jobs += [(f"{p.parent.name}/{p.stem}", p.parent.name, str(p)) for p in sorted(CORPUS.glob("*/*.py"))]
    return jobs


def _on_cuda_line(name: str) -> dict[str, list[str]] | None:
    """The corpus's ``# on cuda: loses {...}`` line for a submission (what a GPU was seen to do), or None."""
    path = CORPUS / f"{name}.py"
    if not path.is_file():
        return None
    for line in path.read_text().splitlines()[1:3]:
        found = re.fullmatch(r"# on cuda: loses (\{.*\})", line.strip())
        if found:
            return ast.literal_eval(found.group(1))
    return None


def _lost(checks: dict, device: str) -> dict[str, set[str]]:
    lost: dict[str, set[str]] = {}
    for key, (status, _) in checks.items():
        d, target, check = key.split("|")
        if d == device and status in ("failed", "error"):
            lost.setdefault(target, set()).add(check)
    return lost


def _set_aside(checks: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, (status, text) in checks.items():
        d, target, check = key.split("|")
        if d == "cuda" and status == "skipped" and "stand-in" in text:
            out.setdefault(target, set()).add(check)
    return out


def _run_side(jobs: list, standin: bool, workers: int) -> dict[tuple[str, str], dict]:
    context = multiprocessing.get_context("spawn")  # each worker imports torch after its environment is set
    with futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_setup,
                                     initargs=(standin,)) as pool:
        return {(r["name"], r["module"]): r for r in pool.map(_grade, jobs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6, help="worker processes per side (default 6)")
    parser.add_argument("--json", type=Path, default=None, help="also write every check's outcome here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    gpu = torch.cuda.is_available()
    jobs = _jobs()
    started = time.perf_counter()
    with futures.ThreadPoolExecutor(2) as sides:
        stand = sides.submit(_run_side, jobs, True, args.jobs)
        real = sides.submit(_run_side, jobs, False, args.jobs) if gpu else None
        standin_results = stand.result()
        gpu_results = real.result() if real else {}
    wall = time.perf_counter() - started

    rows, disagreements, aside_total = [], 0, 0
    names = sorted({name for name, _ in standin_results})
    for name in names:
        mods = [m for n, m in standin_results if n == name]
        s_checks = {k: v for m in mods for k, v in standin_results[(name, m)]["checks"].items()}
        g_checks = {k: v for m in mods for k, v in gpu_results.get((name, m), {}).get("checks", {}).items()}
        s_lost, aside = _lost(s_checks, "cuda"), _set_aside(s_checks)
        aside_total += sum(len(v) for v in aside.values())
        if gpu:
            truth, basis = _lost(g_checks, "cuda"), "GPU"
            # a check the stand-in set aside is not compared (it cost nothing and gained nothing)
            truth = {t: {c for c in v if c not in aside.get(t, set())} for t, v in truth.items()}
            truth = {t: v for t, v in truth.items() if v}
            cpu_same = _lost(s_checks, "cpu") == _lost(g_checks, "cpu")
        else:
            line = _on_cuda_line(name)
            cpu_lost = _lost(s_checks, "cpu")
            # without a GPU: the corpus line for the CUDA-only mistakes; elsewhere the CPU's losses
            graded = {tuple(k.split("|")[1:]) for k, (status, _) in s_checks.items()
                      if k.startswith("cuda|") and status != "skipped"}
            truth = {t: set(v) for t, v in line.items()} if line is not None else \
                {t: {c for c in v if (t, c) in graded} for t, v in cpu_lost.items()}
            truth = {t: v for t, v in truth.items() if v}
            basis, cpu_same = ("corpus line" if line is not None else "CPU losses"), True
        for target in sorted(set(s_lost) | set(truth) | set(aside)):
            a, b = s_lost.get(target, set()), truth.get(target, set())
            verdict = "same" if a == b else ("stand-in extra" if a - b else "") + \
                (" & " if a - b and b - a else "") + ("stand-in missed" if b - a else "")
            disagreements += a != b
            rows.append((name, target, len(b), len(a), len(aside.get(target, ())), verdict,
                         sorted(a ^ b)[:3]))
        if not cpu_same:
            disagreements += 1
            rows.append((name, "(CPU checks)", "-", "-", "-", "CPU outcomes differ between the two runs", []))

    header = ("submission", "target", f"lost ({'GPU' if gpu else 'expected'})", "lost (stand-in)",
              "set aside", "verdict")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(6)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(str(v).ljust(w) for v, w in zip(row[:6], widths)) + (f"  differ: {row[6]}" if row[6] else ""))
    seconds = {side: round(sum(r["seconds"] for r in results.values()), 1)
               for side, results in (("stand-in", standin_results), ("gpu", gpu_results)) if results}
    print(f"\n{len(names)} submissions, {len(rows)} target rows; compared with: "
          f"{'a real GPU (' + torch.cuda.get_device_name(0) + ')' if gpu else 'the corpus lines and CPU losses (no GPU here)'}; "
          f"disagreements: {disagreements}; CUDA checks set aside on the stand-in: {aside_total}; "
          f"grading seconds per side: {seconds}; wall {wall:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu, "standin": {f"{k[0]}::{k[1]}": v for k, v in standin_results.items()},
                                         "real": {f"{k[0]}::{k[1]}": v for k, v in gpu_results.items()}}, indent=1))
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
