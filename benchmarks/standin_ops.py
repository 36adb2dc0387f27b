"""Per-operator cost of the CUDA stand-ins against the CPU (docs/performance.md, "The compiled stand-in").

    python benchmarks/standin_ops.py [--rounds 5]

Each round runs one process per way, interleaved (cpu, Python stand-in, compiled stand-in), each timing
a few operations on small tensors (medians of many repeats, µs); prints per operation the median over
rounds, the spread (min-max) and the ratio to the CPU. The compiled stand-in is built first if need be
(``python -m torchgrade.sandbox.cudastandin``) and loaded before torch, in its own process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

WAYS = ("cpu", "python", "compiled")

# one process: time each operation on tensors of the given way (the code of the child)
CHILD = r'''
import json, sys, timeit
way = sys.argv[1]
if way == "compiled":
    from torchgrade.sandbox import cudastandin
    assert cudastandin.load() is not None, "the compiled stand-in did not load"
import contextlib, torch
if way == "python":
    from torchgrade.sandbox import standin
    scope = standin.active()
else:
    scope = contextlib.nullcontext()
with scope:
    dev = "cpu" if way == "cpu" else "cuda"
    a = torch.randn(8, 8, device=dev); b = torch.randn(8, 8, device=dev)
    w = torch.randn(8, 8, device=dev, requires_grad=True)
    def fwd_bwd():
        torch.relu(a @ w).sum().backward()
    ops = {
        "add 8x8": lambda: a + b,
        "matmul 8x8": lambda: a @ b,
        "view": lambda: a.view(64),
        "add_ in place": lambda: a.add_(0.0),
        "zeros(device=)": lambda: torch.zeros(8, device=dev),
        "forward+backward (matmul, relu, sum)": fwd_bwd,
    }
    out = {}
    for name, fn in ops.items():
        for _ in range(50):
            fn()
        n = 200
        times = timeit.repeat(fn, number=n, repeat=15)
        out[name] = sorted(times)[len(times) // 2] / n * 1e6
print(json.dumps(out))
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "torchgrade.sandbox.cudastandin"], check=True, stdout=subprocess.DEVNULL)
    results: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            done = subprocess.run([sys.executable, "-c", CHILD, way], capture_output=True, text=True, check=True)
            results[way].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"per operation, µs: median of {args.rounds} interleaved rounds [min-max]; x CPU")
    print(f"{'operation':40s} " + " ".join(f"{w:>26s}" for w in WAYS))
    for op in results["cpu"][0]:
        cpu = statistics.median(r[op] for r in results["cpu"])
        cells = []
        for way in WAYS:
            values = [r[op] for r in results[way]]
            med = statistics.median(values)
            cells.append(f"{med:8.1f} [{min(values):6.1f}-{max(values):6.1f}] x{med / cpu:4.1f}")
        print(f"{op:40s} " + " ".join(f"{c:>26s}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
