"""The floor under the course's checks, and what each layer adds on top (docs/performance.md, "The floor").

    python benchmarks/floor.py [--rounds 3] [--check-rounds 2] [TARGETS ...]

1. Record: `torchgrade check` grades the reference (the bundled course, all variants, stand-in on, a
   fresh reference cache) in this process, and every request its checks send to the student's code is
   kept (the reference's twin of each request: ``differential.reference_outcome``).
2. Replay (the probes' torch work): each way in one warm process of its own, every request run once
   untimed and once timed, rounds interleaved (cpu, python, compiled, cpu, ...):
   - ``cpu``: every request on plain CPU tensors, the CUDA variants' inputs moved to the CPU: the floor;
   - ``python``: the CUDA variants on the Python stand-in (torchgrade/sandbox/standin.py);
   - ``compiled``: the CUDA variants on the compiled stand-in (cudastandin.cpp, loaded before torch;
     inputs rebuilt as native ``cuda:0`` tensors).
   The two stand-ins' outcomes are compared request by request (values, devices, errors).
3. The whole `torchgrade check` of the reference, all variants against ``--device cpu``, interleaved: what
   the sandbox protocol, the watch, the trusted side's checks and the reports add to the floor, together.

Medians over rounds, the spread (min-max) beside them. The compiled stand-in is built first if need be.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WAYS = ("cpu", "python", "compiled")


def record(out: str, targets: list[str]) -> None:
    """Grade the reference with `torchgrade check` here, keeping each request of its checks."""
    os.environ["TORCHGRADE_CACHE_DIR"] = tempfile.mkdtemp(prefix="floor-cache-")
    from torchgrade.engine import differential
    from torchgrade.sandbox import wire

    records = []
    original = differential.reference_outcome

    def recording(path, target, request, on_standin=False):  # noqa: ANN001, ANN202
        records.append((str(path), target, wire.encode(request), on_standin))
        return original(path, target, request, on_standin)

    differential.reference_outcome = recording
    from torchgrade.cli import main

    report = tempfile.mkdtemp(prefix="floor-report-")
    try:
        main(["check", "--path", str(ROOT / "reference"), "--report", report, *targets], standalone_mode=False)
    except SystemExit:
        pass
    with open(out, "wb") as f:
        pickle.dump(records, f)


def replay(way: str, records_file: str) -> None:
    """Run every recorded request once untimed, once timed; print times and the outcomes' summaries."""
    if way == "compiled":
        from torchgrade.sandbox import cudastandin

        if cudastandin.load() is None:
            raise SystemExit("the compiled stand-in did not load")
    import hashlib

    import torch

    from torchgrade.engine.differential import load_reference
    from torchgrade.sandbox import standin, wire
    from torchgrade.sandbox.probes import Target, load_course, run_probe
    from torchgrade.sandbox.probes.core import NO_STANDIN

    load_course(str(ROOT / "graders" / "probes"))  # the course's own probes (assignment.yaml's `probes`)

    with open(records_file, "rb") as f:
        records = pickle.load(f)

    bases: dict[int, torch.Tensor] = {}  # one request's storages on cuda:0 (views of one storage stay views)

    def on_cuda(plain: torch.Tensor) -> torch.Tensor:  # the same strides, offset and storage sharing
        storage = plain.untyped_storage()
        base = bases.get(storage.data_ptr())
        if base is None:
            whole = torch.tensor([], dtype=plain.dtype).set_(storage)
            base = bases[storage.data_ptr()] = whole.to("cuda")
        return base.as_strided(plain.shape, plain.stride(), plain.storage_offset())

    def moved(value):  # noqa: ANN001, ANN202 - a stand-in tensor as this way's tensor
        if type(value) is standin.StandIn:
            plain = standin.plain(value).detach()
            made = plain if way == "cpu" else on_cuda(plain)
            return made.requires_grad_(value.requires_grad) if made.is_leaf else made
        if way == "cpu" and (isinstance(value, str) and value in ("cuda", "cuda:0")
                             or isinstance(value, torch.device) and value.type == "cuda"):
            return "cpu"  # (a probe's device= option: the floor runs the CUDA variants' twins on the CPU)
        if isinstance(value, torch.nn.Module):
            return value._apply(moved)
        if isinstance(value, (list, tuple)):
            return type(value)(moved(v) for v in value)
        if isinstance(value, dict):
            return {k: moved(v) for k, v in value.items()}
        return value

    def summary(value):  # noqa: ANN001, ANN202 - what a check compares of an outcome
        if isinstance(value, torch.Tensor):
            where = "cuda" if value.is_cuda else value.device.type
            cpu = standin.plain(value) if type(value) is standin.StandIn else value.detach().cpu()
            data = cpu.double().nan_to_num(1e30).round(decimals=4).tolist() if cpu.is_floating_point() else \
                cpu.tolist() if not cpu.is_complex() else str(cpu)
            return ["tensor", where, str(value.dtype), list(value.shape), data]
        if isinstance(value, dict):
            return {str(k): summary(v) for k, v in value.items() if k not in ("traceback", "elapsed")}
        if isinstance(value, (list, tuple)):
            return [summary(v) for v in value]
        if isinstance(value, (int, float, str, bool, type(None))):
            return value
        return type(value).__name__

    def run(path: str, target: str, encoded: bytes, on_standin: bool) -> tuple[float, str]:
        with standin.active() if on_standin and way == "python" else _nothing():
            request = wire.decode(encoded)
        args, kwargs = request["args"], request["kwargs"]
        if on_standin and way != "python":
            bases.clear()
            args, kwargs, request["options"] = moved(args), moved(kwargs), moved(request["options"])
        obj = getattr(load_reference(Path(path)), target)
        if on_standin and way == "compiled" and request["probe"] in NO_STANDIN:  # set aside on both (run_probe's rule)
            return 0.0, hashlib.sha256(json.dumps({"standin_unsupported": NO_STANDIN[request["probe"]]}).encode()
                                       ).hexdigest()[:16]
        started = time.perf_counter()
        outcome = run_probe(request["probe"], Target(obj, target), tuple(args), kwargs, request["options"],
                            on_standin=on_standin and way == "python")
        elapsed = time.perf_counter() - started
        try:
            text = json.dumps(summary(outcome), sort_keys=True, default=str)
        except Exception as e:  # noqa: BLE001 - a summary is only compared
            text = f"unsummarised {type(e).__name__}"
        return elapsed, text if os.environ.get("FLOOR_SUMMARIES") else hashlib.sha256(text.encode()).hexdigest()[:16]

    for r in records:  # warm: every reference module imported, every path taken once
        run(*r)
    times, digests = [], []
    for r in records:
        elapsed, digest = run(*r)
        times.append(elapsed)
        digests.append(digest)
    aside = [r[3] and wire.decode(r[2])["probe"] in NO_STANDIN for r in records]
    print(json.dumps({"times": times, "digests": digests, "standin": [r[3] for r in records], "aside": aside}))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _child(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check(device: str | None, targets: list[str]) -> float:
    env = {**os.environ, "TORCHGRADE_CACHE_DIR": tempfile.mkdtemp(prefix="floor-check-")}
    command = [sys.executable, "-m", "torchgrade.cli", "check", "--path", str(ROOT / "reference"),
               "--report", tempfile.mkdtemp(prefix="floor-report-"), *(["--device", device] if device else []), *targets]
    started = time.perf_counter()
    subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    return time.perf_counter() - started


def _line(name: str, values: list[float], base: float | None = None) -> str:
    med = statistics.median(values)
    ratio = f"  x{med / base:.2f} of the floor" if base else ""
    return f"  {name:58s} {med:8.2f} s  [{min(values):.2f}-{max(values):.2f}]{ratio}"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--record":
        record(sys.argv[2], sys.argv[3:])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--replay":
        replay(sys.argv[2], sys.argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--check-rounds", type=int, default=2, help="whole checks, each way (0: none)")
    parser.add_argument("--records", help="replay these recorded requests (a file --record wrote) instead")
    parser.add_argument("targets", nargs="*")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "torchgrade.sandbox.cudastandin"], check=True, stdout=subprocess.DEVNULL)
    records = args.records or str(Path(tempfile.mkdtemp(prefix="floor-")) / "requests.pkl")
    if not args.records:
        subprocess.run([sys.executable, __file__, "--record", records, *args.targets], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    runs: dict[str, list[dict]] = {w: [] for w in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            runs[way].append(_child("--replay", way, records))
    flags, aside = runs["cpu"][0]["standin"], runs["cpu"][0]["aside"]
    cuda = [i for i, f in enumerate(flags) if f and not aside[i]]  # the CUDA variants a stand-in grades
    cpu_only = [i for i, f in enumerate(flags) if not f]
    everything = list(range(len(flags)))

    def total(way: str, which: list[int]) -> list[float]:
        return [sum(run["times"][i] for i in which) for run in runs[way]]

    floor = statistics.median(total("cpu", everything))
    print(f"requests of the course's checks: {len(flags)}: {len(cpu_only)} CPU variants, {len(cuda)} CUDA variants "
          f"graded on a stand-in, {sum(aside)} set aside there (data-parallel); {args.rounds} interleaved rounds, "
          "one warm process per way")
    print("the probes' torch work (each request once, the reference's code; medians [min-max]):")
    print(_line("floor: every variant on plain CPU tensors", total("cpu", everything), floor))
    print(_line("  the CPU variants", total("cpu", cpu_only), floor))
    print(_line("  the graded CUDA variants' twins on the CPU", total("cpu", cuda), floor))
    twins = total("cpu", cuda)
    for way, label in (("python", "Python stand-in"), ("compiled", "compiled stand-in")):
        on = total(way, cuda)
        print(_line(f"  the graded CUDA variants on the {label}", on, floor))
        paired = [a / b for a, b in zip(on, twins)]
        against = [a / b for a, b in zip(on, total(way, cpu_only))]
        print(f"  {'':58s} per round x{statistics.median(paired):.2f} [{min(paired):.2f}-{max(paired):.2f}] their CPU "
              f"twins, x{statistics.median(against):.2f} [{min(against):.2f}-{max(against):.2f}] the CPU variants "
              "of the same process")
    same = sum(runs["python"][0]["digests"][i] == runs["compiled"][0]["digests"][i] for i in cuda)
    print(f"same outcome from both stand-ins: {same} of {len(cuda)} graded CUDA requests")
    differ = [i for i in cuda if runs["python"][0]["digests"][i] != runs["compiled"][0]["digests"][i]]
    if differ:
        with open(records, "rb") as f:
            recorded = pickle.load(f)
        from torchgrade.sandbox import wire

        for i in differ[:20]:
            print(f"  differs: {Path(recorded[i][0]).stem}.{recorded[i][1]} ({wire.decode(recorded[i][2])['probe']})")
    if args.check_rounds:
        whole: dict[str, list[float]] = {"all": [], "cpu": []}
        for _ in range(args.check_rounds):
            whole["all"].append(_check(None, args.targets))
            whole["cpu"].append(_check("cpu", args.targets))
        print("the whole `torchgrade check` of the reference (a process each, cold reference cache):")
        print(_line("all variants (Python stand-in)", whole["all"], floor))
        print(_line("--device cpu", whole["cpu"], floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
