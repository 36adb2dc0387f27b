"""The dispatcher watch's cost per request, each layer alone (torchgrade/sandbox/recorder.py, observer.py).

    python benchmarks/watch_benchmark.py [--requests 400] [--module 100]

A watched request is `DispatchWatch.armed()` around the probe, with the student's code in `window()`s.
Per request, median of 5 rounds of `--requests` requests, for two requests: an empty window, and one
whose student code runs ~120 operator events at the dispatcher (hidden from the mode, so every one is
looked at). Rows:

- the mode alone: a window without an armed watch (what an unwatched target costs);
- profiler: a Kineto session started and stopped around each request (the fallback with -x);
- profiler, kept: one Kineto session for many requests, its findings read every `--module` requests (the
  fallback's usual way: a module's requests, then its verdicts);
- compiled observer: the RecordFunction observer armed around each request (built first if needed:
  `torchgrade observer build`).

It also prints the events each request held, which must be the same for both watches, and which watch a
sandbox started here would use.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from torchgrade.sandbox import observer  # noqa: E402
from torchgrade.sandbox.recorder import CallRecorder, DispatchWatch  # noqa: E402


def busy(x: torch.Tensor) -> None:
    """~120 operator events unseen by the mode (as a student's hidden calls are)."""
    with torch._C.DisableTorchFunction():
        for _ in range(10):
            x = torch.relu(x * 1.5 + 1)


def per_request(watch: DispatchWatch, body, requests: int, armed: bool, module: int = 0) -> float:
    """Seconds per request, median of 5 rounds (with `module`, one kept session read every `module` requests)."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for i in range(requests):
            watch.mode.reset()
            if armed:
                with watch.armed(str(i) if module else None):
                    with watch.window():
                        body()
                if module and (i + 1) % module == 0:
                    watch.findings()
            else:
                with watch.window():
                    body()
        if module:
            watch.findings()
        rounds.append((time.perf_counter() - start) / requests)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--module", type=int, default=100, help="requests per kept profiler session")
    args = parser.parse_args()
    x = torch.ones(8)
    bodies = {"empty window": lambda: None, "~120 events": lambda: busy(x)}
    try:
        path = str(observer.build())
    except observer.BuildError as e:
        path = None
        print(f"(no compiled observer here: {e})")
    rows: dict[str, dict[str, float]] = {}
    events: dict[str, int] = {}
    kept = f"{observer.PROFILER}, kept"
    engines = [("the mode alone", None), (observer.PROFILER, None), (kept, None)] + \
        ([(observer.COMPILED, path)] if path else [])
    for name, library in engines:
        observer.load(library)  # (None: the profiler)
        if library is not None and observer.module is None:
            print("(the compiled observer failed its canary here: the profiler watches)")
            continue
        watch = DispatchWatch(CallRecorder(str(ROOT / "no-submission") + "/"))
        rows[name] = {}
        for label, body in bodies.items():
            rows[name][label] = per_request(watch, body, args.requests, armed=name != "the mode alone",
                                            module=args.module if name == kept else 0)
            if name not in ("the mode alone", kept):
                events[f"{name}, {label}"] = watch.events
    observer.load(None)
    print(f"torch {torch.__version__}; per request, median of 5 rounds of {args.requests}")
    print(f"{'watch':<20}" + "".join(f"{label:>16}" for label in bodies))
    for name, cells in rows.items():
        print(f"{name:<20}" + "".join(f"{cells[label] * 1e6:>13.1f} µs" for label in bodies))
    print("events per request: " + ", ".join(f"{k}: {v}" for k, v in events.items()))
    print(f"a sandbox started here would use: {observer.COMPILED if observer.built() else observer.PROFILER}")


if __name__ == "__main__":
    main()
