"""How long `torchgrade similarity` takes on a class of near-copies: `python benchmarks/similarity_benchmark.py [N]`.

N students (default 300), each the bundled course's reference with every local name renamed and the code
reformatted (tests/near_copies.py, a different seed each): the worst case, where every pair of every
target is similar. Their modules are laid out as `torchgrade grade` keeps them (DIR/<student>/instructor/code/),
and the command runs as an instructor runs it; the time is its wall clock, printed with the pair count.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from near_copies import near_copy  # noqa: E402


def main(count: int) -> None:
    from torchgrade.engine.config import load_assignment
    from torchgrade.classroom.similarity import modules

    assignment = load_assignment(ROOT / "assignment.yaml")
    names = tuple(e.name for e in assignment.exercises)
    reference = modules(assignment.reference_dir, names)
    with tempfile.TemporaryDirectory(prefix="similarity-benchmark-") as tmp:
        out = Path(tmp)
        for i in range(count):
            code = out / f"student{i:03d}" / "instructor" / "code"
            code.mkdir(parents=True)
            for module, text in reference.items():
                (code / f"{module}.py").write_text(near_copy(text, seed=i))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "torchgrade.cli", "similarity", str(out), "--assignment",
                               str(assignment.path)], capture_output=True, text=True)
        seconds = time.perf_counter() - started
        print(done.stdout.strip() or done.stderr.strip())
        print(f"{count} students, {len(assignment.targets)} targets: {seconds:.1f} s "
              f"(page: {(out / 'similarity.html').stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
