"""torchgrade's speed where users feel it, each figure beside the naive way, measured in one run.

    python benchmarks/class_benchmark.py                 # everything below, -j 2
    python benchmarks/class_benchmark.py --skip-naive --keep reports/bench

1. **A class of correct work** (`--correct`, default 20): copies of the reference solutions, each with
   a comment naming the student so that no two submissions are the same files.
2. **A mixed class** (`-n`, default 24): each student's module is the reference (right) or the stub
   (not done) at random (seeded).
   Both classes are graded the whole assignment (visible and hidden checks, every device available)
   from a cold start, two ways, at the same parallelism:
   - torchgrade: `torchgrade grade CLASS --out DIR -j N`, one process;
   - naive: `python -m pytest -c torchgrade/checks.ini graders/checks --submission DIR
     --results-json OUT`, one fresh process per submission, N at a time (`--naive-jobs`).
   It prints submissions per minute for each, their ratio, checks that both gave every student the
   same score, where the batch's check time goes, per exercise, and how much of the CPU a virtual
   machine's host took meanwhile (its steal time: a run it slowed is not comparable with another).
3. **A student's re-check on save** (`torchgrade check --watch`): a module's file is changed 10
   times; the median time from the write to the re-check's summary (polling included).
4. **A student's first check**: a cold `torchgrade check` of one target and of the whole assignment in
   the student bundle (`torchgrade bundle`: the recorded outcomes, no reference), each beside
   `python -c "import torch"` alone (medians of 5 rounds of the three, interleaved).
   Sections 4 and 5 run without PYTHONDONTWRITEBYTECODE, as a student's machine and a Gradescope image
   do (`as_installed`): the first run writes the bytecode a user's later runs find.
5. **One submission in a Gradescope envelope** (`--envelope`, on by default): half a CPU and 768 MiB
   (benchmarks/envelope.py: a cgroup where the machine allows one, else taskset, saying which), with
   no GPU: `python -c "import torch"` there, then `torchgrade autograde` (what `run_autograder` runs)
   on a correct submission, its time beside importing torch there, and the envelope's peak memory;
   and the CPU time of each (the cgroup's own count where there is one), which a busy machine changes least.
6. **The CUDA stand-in's cost** (`--standin RUNS`, only this): the correct-work class (`--correct`)
   graded RUNS times with `TORCHGRADE_CUDA_STANDIN=off` and RUNS times with `score`, interleaved on the
   same machine (a shared machine is noisy: the ratio of medians compares, not absolute times); on a
   machine without CUDA only, where the stand-in grades the CUDA checks (docs/devices.md). Then the
   floor: what the class would take if each stand-in check cost only what its CPU twin does (the same
   probe and student's code run once more), from the checks' own durations.
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
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from torchgrade.engine.config import load_assignment  # noqa: E402
from torchgrade.engine.grading import CHECKS_INI  # noqa: E402

#: Targets on a 2-core machine: the mixed class (class-scale grading) and correct work (speed where felt).
TARGET_PER_MINUTE = 60.0
TARGET_RATIO = 8.0
TARGET_CORRECT_PER_MINUTE = 80.0
TARGET_RECHECK_S = 1.0
#: A student's first check and one Gradescope submission, as multiples of importing torch alone.
TARGET_ONE_TARGET = 1.3
TARGET_WHOLE_CHECK = 2.0
TARGET_ENVELOPE = 3.0
TARGET_PEAK_MIB = 600
#: The correct-work class with the CUDA stand-in on, as a multiple of its time with it off (issue 30).
TARGET_STANDIN = 1.15
#: The target a cold check grades.
ONE_TARGET = "tensors.view"


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


#: The largest share of the machine's CPU its host took during a timed run (see `stolen`).
_most_stolen = [0.0]


def _cpu_ticks() -> tuple[int, int] | None:
    """(stolen, all) CPU ticks of this machine so far (/proc/stat), or None where there is no such file."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (ticks[7] if len(ticks) > 7 else 0), sum(ticks)


def stolen(since: tuple[int, int] | None) -> str:
    """Words for the share of the CPU a virtual machine's host took since `since` (_cpu_ticks): on a
    shared host it can slow every figure of one run several times over, whatever the load average says."""
    now = _cpu_ticks()
    if since is None or now is None or now[1] <= since[1]:
        return ""
    share = (now[0] - since[0]) / (now[1] - since[1])
    _most_stolen[0] = max(_most_stolen[0], share)
    return f"  (host took {100 * share:.0f}% of the CPU)"


def compare(title: str, class_dir: Path, work: Path, jobs: int, naive_jobs: int, skip_naive: bool) -> tuple:
    """Grade one class both ways; print the figures; (batch rate, ratio or None, ledger records)."""
    count = len(list(class_dir.iterdir()))
    ticks = _cpu_ticks()
    batch_s, batch_scores, records = batch(class_dir, work / f"{title}-batch", jobs)
    batch_rate = count / batch_s * 60
    print(f"  torchgrade grade -j {jobs}: {batch_s:7.1f} s  {batch_rate:7.1f} submissions/min{stolen(ticks)}")
    ratio = None
    if not skip_naive:
        ticks = _cpu_ticks()
        naive_s, naive_scores = naive(class_dir, work / f"{title}-naive", naive_jobs)
        naive_rate = count / naive_s * 60
        ratio = batch_rate / naive_rate
        print(f"  naive (one pytest each, {naive_jobs} at a time): {naive_s:7.1f} s  {naive_rate:7.1f} submissions/min"
              f"{stolen(ticks)}")
        print(f"  ratio: {ratio:.1f}x")
        differ = {n: (naive_scores[n], batch_scores.get(n)) for n in naive_scores if naive_scores[n] != batch_scores.get(n)}
        print("  scores: the same both ways" if not differ else f"  scores DIFFER (naive, batch): {differ}")
    per: dict[str, float] = {}
    for r in records:
        for exercise, seconds in r["exercise_seconds"].items():
            per[exercise] = per.get(exercise, 0.0) + seconds
    total = sum(per.values()) or 1.0
    print("  batch check time per submission, by exercise (one worker's seconds):")
    for exercise, seconds in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"    {exercise:<10} {seconds / len(records):6.3f} s  {100 * seconds / total:5.1f}%")
    overhead = statistics.fmean(r["seconds"] - sum(r["exercise_seconds"].values()) for r in records)
    print(f"    {'(session)':<10} {overhead:6.3f} s  per submission outside the checks (setup, sandbox teardown)")
    return batch_rate, ratio, records


def standin_figures(off: list[float], score: list[float]) -> tuple[float, float, float, list[float]]:
    """(median seconds with the stand-in off, with it on, the ratio of the medians, each run's ratio with
    the run beside it) from interleaved runs."""
    off_median, score_median = statistics.median(off), statistics.median(score)
    return off_median, score_median, score_median / off_median, [b / a for a, b in zip(off, score)]


def standin_floor(graded: Path, off_seconds: float) -> tuple[float, float, float]:
    """What any stand-in that runs each CUDA check's probe once more must cost, from one graded class.

    `graded`: the output folder of a run with the stand-in on; `off_seconds`: the checking seconds of a
    run with it off (the ledger's, summed over the class: one worker's time, whatever -j). Returns (the
    stand-in checks' own seconds, their CPU twins' seconds, the floor): a stand-in whose every check cost
    no more than its CPU twin (the same probe, the same student's code, on plain CPU tensors) would
    still make the class `floor` times slower."""
    standin = twins = 0.0
    for results in graded.glob("*/results.json"):
        checks = {t["extra_data"]["nodeid"]: t["extra_data"] for t in json.loads(results.read_text())["tests"]
                  if "nodeid" in t.get("extra_data", {})}
        # Each module's first check (in the order run) also started the module's sandbox process: not
        # counted, nor its twin, so that the floor is the checks' own cost, if anything too low.
        starts = {id(data) for data in {d.get("exercise"): d for d in reversed(list(checks.values()))}.values()}
        for nodeid, data in checks.items():
            twin = checks.get(nodeid.replace("[cuda", "[cpu", 1))
            if data.get("device") == "cuda" and data.get("outcome") != "skipped" and twin is not None \
                    and id(twin) not in starts:
                standin += data.get("duration") or 0.0
                twins += twin.get("duration") or 0.0
    return standin, twins, 1 + twins / off_seconds if off_seconds else float("nan")


def standin_cost(class_dir: Path, work: Path, jobs: int, runs: int) -> float:
    """`torchgrade grade` of one class with cuda_standin off and score, `runs` times each, interleaved
    (off first, then score first, ...); prints the figures; returns the ratio of the medians."""
    seconds: dict[str, list[float]] = {"off": [], "score": []}
    checking: dict[str, float] = {}  # the last run's checking seconds, summed over the class (ledger)
    with mock.patch.dict(os.environ):  # (the policy of each run; the caller's environment as it was after)
        for run in range(runs):
            for policy in ("off", "score") if run % 2 == 0 else ("score", "off"):
                os.environ["TORCHGRADE_CUDA_STANDIN"] = policy
                ticks = _cpu_ticks()
                took, scores, records = batch(class_dir, work / f"standin-{policy}-{run}", jobs)
                seconds[policy].append(took)
                checking[policy] = sum(r["seconds"] for r in records)
                print(f"  run {run + 1}, cuda_standin {policy:<5}: {took:7.1f} s  scores {sorted(set(scores.values()))}"
                      f"  load {os.getloadavg()[0]:.1f}{stolen(ticks)}")
    off, score, ratio, each = standin_figures(seconds["off"], seconds["score"])
    print(f"  medians: off {off:.1f} s, score {score:.1f} s: {ratio:.2f}x (each run: "
          f"{', '.join(f'{r:.2f}' for r in each)})")
    own, twins, floor = standin_floor(work / f"standin-score-{runs - 1}", checking["off"])
    print(f"  the stand-in's checks took {own:.1f} s of checking, their CPU twins {twins:.1f} s, all checks with it "
          f"off {checking['off']:.1f} s: a stand-in costing only what the twins cost would be {floor:.2f}x off")
    return ratio


def recheck_median(work: Path, times: int = 10) -> float:
    """`check --watch` on a copy of the reference: seconds from a change of tensors.py to its re-check."""
    import threading

    from torchgrade.sandbox.host import start_early
    from torchgrade.engine.watch import Watcher

    folder = work / "watched"
    shutil.copytree(ROOT / "reference", folder)
    assignment = load_assignment(ROOT / "assignment.yaml")
    start_early(assignment.probes_dir)
    done = threading.Event()
    watcher = Watcher(assignment, folder, device="all")
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(lambda recheck: done.set(), stop), daemon=True)
    thread.start()
    done.wait(600)
    seconds = []
    try:
        for i in range(times):
            done.clear()
            time.sleep(0.3)  # a student types between saves
            started = time.perf_counter()
            with open(folder / "tensors.py", "a", encoding="utf-8") as f:
                f.write(f"\n# edit {i}\n")
            if not done.wait(60):
                raise RuntimeError("the watch did not re-check within 60 s")
            seconds.append(time.perf_counter() - started)
    finally:
        stop.set()
        thread.join(30)
        watcher.close()
    return statistics.median(seconds)


def as_installed() -> dict[str, str]:
    """This environment as a student's machine and a Gradescope image have it: without
    PYTHONDONTWRITEBYTECODE (set on some CI machines). Installed torch and torchgrade come with their
    bytecode compiled, and pytest keeps its rewritten checks' bytecode after the first run; with that
    variable set, the engine run from a folder, and every check file, would be compiled from source
    at every run (a fifth of a first check on the development machine), which no user's run is."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def first_check(work: Path, repeats: int = 5) -> tuple[float, float, float]:
    """Median seconds of a cold `torchgrade check ONE_TARGET` and of a whole `torchgrade check`, in the
    student bundle made from the reference (a student's first check), and of `python -c "import torch"`."""
    env = as_installed()
    subprocess.run([sys.executable, "-m", "torchgrade.cli", "bundle", "--out", str(work / "bundle"), "--device", "cpu"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    folder = work / "bundle" / "student"
    shutil.rmtree(folder / "exercises")
    shutil.copytree(ROOT / "reference", folder / "exercises", ignore=shutil.ignore_patterns("*.md", "__pycache__"))

    def timed(args: list[str]) -> float:
        started = time.perf_counter()
        subprocess.run(args, cwd=folder, env=env, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        return time.perf_counter() - started

    check = [sys.executable, "-m", "torchgrade.cli", "check", "--device", "cpu", "--report", str(work / "cold")]
    torch_only = [sys.executable, "-c", "import torch"]
    # Interleaved, one of each per round: a shared machine's speed drifts, and a ratio of medians taken
    # minutes apart measured the drift (1.2x to 1.45x for one target on one day).
    rounds = [(timed([*check, ONE_TARGET]), timed(check), timed(torch_only)) for _ in range(repeats)]
    one, whole, torch_alone = zip(*rounds)
    return statistics.median(one), statistics.median(whole), statistics.median(torch_alone)


def in_envelope(work: Path, repeats: int) -> tuple[str, float, float, int, str, tuple[float, float]]:
    """One correct submission graded by `torchgrade autograde` in a Gradescope-sized envelope: (how,
    median seconds of import torch there, median seconds of the grade, peak bytes, the grade's line,
    (median CPU seconds of the grade, of import torch: Envelope.last_cpu))."""
    from envelope import Envelope

    submission = work / "gradescope-submission"
    shutil.copytree(ROOT / "reference", submission, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    env = {**as_installed(), "CUDA_VISIBLE_DEVICES": ""}  # Gradescope has no GPU
    envelope = Envelope()
    try:
        torch_runs = []
        for _ in range(repeats):
            torch_runs.append((envelope.run([sys.executable, "-c", "import torch"], env=env)[0], envelope.last_cpu))
        torch_only = statistics.median(s for s, _ in torch_runs)
        runs, line = [], ""
        cache = work / "gradescope-reference-cache"
        # as `setup.sh` does when the image is built: the reference graded once, its outcomes kept
        subprocess.run([sys.executable, "-m", "torchgrade.cli", "autograde", str(submission), "--results",
                        str(work / "gradescope-build.json"), "--assignment", str(ROOT / "assignment.yaml"),
                        "--device", "cpu", "--reference-outcomes", str(cache)],
                       cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        for i in range(repeats):
            results = work / f"gradescope-results-{i}.json"
            seconds, peak, status = envelope.run(
                [sys.executable, "-m", "torchgrade.cli", "autograde", str(submission), "--results", str(results),
                 "--assignment", str(ROOT / "assignment.yaml"), "--device", "cpu", "--reference-outcomes", str(cache)],
                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if status:
                raise RuntimeError(f"torchgrade autograde failed in the envelope (status {status})")
            data = json.loads(results.read_text())
            line = f"{data['score']:g} / {data['extra_data']['max_score']:g}, isolation {data['extra_data']['isolation']}, " \
                   f"watch {data['extra_data'].get('watch') or '?'}"
            runs.append((seconds, peak, envelope.last_cpu))
        cpu = (statistics.median(c for _, _, c in runs), statistics.median(c for _, c in torch_runs))
        return (envelope.how, torch_only, statistics.median(s for s, _, _ in runs), max(p for _, p, _ in runs), line,
                cpu)
    finally:
        envelope.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--submissions", type=int, default=24, help="mixed class size (default 24)")
    parser.add_argument("--correct", type=int, default=20, help="correct-work class size (default 20; 0: skip)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="torchgrade worker processes (default 2)")
    parser.add_argument("--done", type=float, default=0.7, help="chance a module is finished (default 0.7)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--naive-jobs", type=int, default=None,
                        help="naive pytest processes at a time (default: the same as -j)")
    parser.add_argument("--skip-naive", action="store_true", help="only time torchgrade")
    parser.add_argument("--keep", type=Path, help="keep the classes and the outputs in this folder")
    parser.add_argument("--envelope", type=int, default=2, metavar="RUNS",
                        help="runs of one submission in a Gradescope-sized envelope (default 2; 0: skip)")
    parser.add_argument("--standin", type=int, default=0, metavar="RUNS",
                        help="only the CUDA stand-in's cost: the correct-work class graded RUNS times with "
                             "cuda_standin off and RUNS with score, interleaved (a machine without CUDA)")
    parser.add_argument("--only-single", action="store_true",
                        help="only the single-submission figures (4 and 5), not the classes or the re-check")
    args = parser.parse_args()
    naive_jobs = args.naive_jobs or args.jobs

    work = Path(tempfile.mkdtemp(prefix="torchgrade-bench-"))
    results = []
    try:
        print(f"load average before (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} cores")
        modules = len(load_assignment(ROOT / "assignment.yaml").exercises)
        if args.only_single:
            args.correct = args.submissions = 0
        if args.standin:
            import torch

            if torch.cuda.is_available():
                print("6. the CUDA stand-in grades nothing where CUDA is: run --standin on a machine without it")
                return 2
            print(f"6. the CUDA stand-in's cost: {args.correct} correct submissions, {args.standin} runs each way, "
                  f"-j {args.jobs}")
            make_class(work / "correct", args.correct, 1.0, args.seed)
            ratio = standin_cost(work / "correct", work, args.jobs, args.standin)
            print(f"load average at the end (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
            print(f"target correct work with the stand-in <= {TARGET_STANDIN:g}x off: "
                  f"{'met' if ratio <= TARGET_STANDIN else 'NOT met'}")
            return 0
        if args.correct:
            print(f"1. correct work: {args.correct} submissions, all {modules} modules right")
            make_class(work / "correct", args.correct, 1.0, args.seed)
            rate, ratio, _ = compare("correct", work / "correct", work, args.jobs, naive_jobs, args.skip_naive)
            results.append((f"correct work >= {TARGET_CORRECT_PER_MINUTE:g}/min", rate >= TARGET_CORRECT_PER_MINUTE))
            if ratio is not None:
                results.append((f"correct work >= {TARGET_RATIO:g}x naive at equal parallelism", ratio >= TARGET_RATIO))
        if args.submissions:
            finished = make_class(work / "mixed", args.submissions, args.done, args.seed)
            done = statistics.fmean(len(v) for v in finished.values())
            print(f"2. mixed class: {args.submissions} submissions, {done:.1f} of {modules} modules finished on average")
            rate, ratio, _ = compare("mixed", work / "mixed", work, args.jobs, naive_jobs, args.skip_naive)
            results.append((f"mixed class >= {TARGET_PER_MINUTE:g}/min", rate >= TARGET_PER_MINUTE))
            if ratio is not None:
                results.append((f"mixed class >= {TARGET_RATIO:g}x naive", ratio >= TARGET_RATIO))
        if not args.only_single:
            median = recheck_median(work)
            print(f"3. check --watch, one module changed: median {median:.2f} s from the save to the summary (10 saves)")
            results.append((f"re-check < {TARGET_RECHECK_S:g} s", median < TARGET_RECHECK_S))
        one, whole, torch_only = first_check(work)
        print(f"4. a student's first check, in the bundle: `torchgrade check {ONE_TARGET}` {one:.2f} s "
              f"({one / torch_only:.2f}x), the whole assignment {whole:.2f} s ({whole / torch_only:.2f}x); "
              f"`python -c \"import torch\"` alone: {torch_only:.2f} s (medians of 5 interleaved rounds)")
        results.append((f"one target <= {TARGET_ONE_TARGET:g}x import torch", one <= TARGET_ONE_TARGET * torch_only))
        results.append((f"whole check <= {TARGET_WHOLE_CHECK:g}x import torch", whole <= TARGET_WHOLE_CHECK * torch_only))
        if args.envelope:
            how, torch_there, graded, peak, line, (cpu, torch_cpu) = in_envelope(work, args.envelope)
            print(f"5. one correct submission in a Gradescope envelope ({how}): `torchgrade autograde` "
                  f"{graded:.1f} s ({line}); `python -c \"import torch\"` there: {torch_there:.1f} s "
                  f"({graded / torch_there:.1f}x); peak memory {peak / 2**20:.0f} MiB; CPU time "
                  f"{cpu:.1f} s beside {torch_cpu:.1f} s ({cpu / max(torch_cpu, 1e-9):.1f}x)")
            results.append((f"one submission <= {TARGET_ENVELOPE:g}x import torch in the envelope",
                            graded <= TARGET_ENVELOPE * torch_there))
            results.append((f"peak memory < {TARGET_PEAK_MIB} MiB", 0 < peak < TARGET_PEAK_MIB << 20))
        print(f"load average at the end (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"(other work on the machine slows every figure)")
        if _most_stolen[0] > 0.05:
            print(f"the host took up to {100 * _most_stolen[0]:.0f}% of this machine's CPU during a timed run: "
                  f"its figures are not comparable with another run's (run again)")
        for name, met in results:
            print(f"target {name}: {'met' if met else 'NOT met'}")
        return 0
    finally:
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
