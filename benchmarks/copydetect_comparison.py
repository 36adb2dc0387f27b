"""torchgrade's similarity against copydetect on the same code: `python benchmarks/copydetect_comparison.py`.

Needs `pip install copydetect` (not a dependency of torchgrade). Two measurements, both on what
tests/test_similarity.py holds torchgrade to:

1. Each kind of disguise (tests/near_copies.py DISGUISES) applied to the bundled course's reference: the
   lowest and the mean similarity of a copy with the reference, over the 44 targets for torchgrade (per
   target, the stub's code left out) and over the 9 modules for copydetect (whole files, its defaults:
   k = 25 tokens, window 1, names filtered; the stubs as boilerplate; a file pair's similarity the mean of
   its two sides).
2. The class of tests/near_copies.py `disguised_class` (19 independent students from the fairness corpus,
   six disguised copies of them, two copies of the reference): where the seven copying pairs rank among all
   pairs of students (the reference left out: copydetect has no sources), by torchgrade's evidence and by copydetect (a pair's score: the sum over modules of
   its file pair's similarity), and the highest-ranked pair of independent students. With the time each took,
   and each copying pair's lowest torchgrade similarity over the targets it copied.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from near_copies import DISGUISES, disguised_class  # noqa: E402


def _fingerprints(copydetect, texts: dict[str, str], folder: Path, boilerplate: dict[str, list]) -> dict:
    prints = {}
    for module, text in texts.items():
        path = folder / f"{module}.py"
        path.write_text(text)
        prints[module] = copydetect.CodeFingerprint(str(path), 25, 1, boilerplate.get(module))
    return prints


def _similarity(copydetect, a, b) -> float:
    _, (first, second), _ = copydetect.compare_files(a, b)
    return (first + second) / 2


def main() -> None:
    import copydetect
    import numpy as np

    from torchgrade.classroom import similarity as sim
    from torchgrade.engine.config import load_assignment

    assignment = load_assignment(ROOT / "assignment.yaml")
    names = tuple(e.name for e in assignment.exercises)
    targets = [(t.exercise, t.name) for t in assignment.targets]
    reference = sim.modules(assignment.reference_dir, names)
    stubs_text = sim.modules(assignment.stubs_dir, names)
    stubs = dict(sim.versions_of("stub", stubs_text, targets))
    with tempfile.TemporaryDirectory(prefix="copydetect-comparison-") as tmp:
        tmp = Path(tmp)
        (tmp / "stub").mkdir()
        boilerplate = {m: np.array(sorted(p.hashes)) for m, p in _fingerprints(copydetect, stubs_text, tmp / "stub", {}).items()}
        (tmp / "reference").mkdir()
        theirs_reference = _fingerprints(copydetect, reference, tmp / "reference", boilerplate)
        ours_reference = dict(sim.versions_of("reference", reference, targets))
        print("1. A disguised copy of the reference: similarity with it, lowest and mean")
        print(f"   {'disguise':26s} {'torchgrade (44 targets)':>24s} {'copydetect (9 modules)':>24s}")
        for i, (kind, disguise) in enumerate(DISGUISES.items()):
            copy = {m: disguise(text, {t for e, t in targets if e == m}) for m, text in reference.items()}
            ours_copy = dict(sim.versions_of("copy", copy, targets))
            ours = [sim.compare([ours_reference[q], ours_copy[q]], set(stubs[q].grams), q, 0.0)[0] for q in ours_reference]
            ours = [p[0].similarity if p else 0.0 for p in ours]
            (tmp / f"copy{i}").mkdir()
            theirs_copy = _fingerprints(copydetect, copy, tmp / f"copy{i}", boilerplate)
            theirs = [_similarity(copydetect, theirs_reference[m], theirs_copy[m]) for m in names]
            print(f"   {kind:26s} {min(ours):>15.2f} {sum(ours) / len(ours):>8.2f} "
                  f"{min(theirs):>15.2f} {sum(theirs) / len(theirs):>8.2f}")

        students, copies, independent = disguised_class(ROOT / "tests" / "fairness", assignment)
        started = time.perf_counter()
        report = sim.analyse(students, assignment, {"reference": reference})
        ours_seconds = time.perf_counter() - started
        started = time.perf_counter()
        prints = {}
        for who, code in students.items():
            (tmp / who).mkdir()
            prints[who] = _fingerprints(copydetect, code, tmp / who, boilerplate)
        people = sorted(students)
        theirs = {}
        for i, a in enumerate(people):
            for b in people[i + 1:]:
                theirs[(a, b)] = sum(_similarity(copydetect, prints[a][m], prints[b][m]) for m in names)
        theirs_seconds = time.perf_counter() - started
        ours = {(a, b): report.evidence.get((a, b), 0.0) for i, a in enumerate(people) for b in people[i + 1:]}
        print(f"\n2. The class: {len(people)} students, {len(ours)} pairs of students; each copying pair's lowest "
              "torchgrade similarity over the targets it copied")
        found = {frozenset((p.a, p.b)): {m.target: m.similarity for m in p.matches} for p in report.pairs}
        for pair, kind in zip(copies, [*DISGUISES, "both copied the reference"]):
            lowest = min(copies[pair], key=lambda t: found.get(pair, {}).get(t, 0.0))
            print(f"   {kind:26s} {' and '.join(sorted(pair)):34s} {len(copies[pair]):2d} targets, lowest "
                  f"{found.get(pair, {}).get(lowest, 0.0):.2f} ({lowest})")
        print(f"   the {len(copies)} copying pairs' ranks (1 = first):")
        for label, scores, seconds in (("torchgrade evidence", ours, ours_seconds), ("copydetect", theirs, theirs_seconds)):
            ranked = sorted(scores, key=lambda k: -scores[k])
            ranks = sorted(ranked.index(tuple(sorted(pair))) + 1 for pair in copies)
            honest = [k for k in ranked if k[0] in independent and k[1] in independent]
            lowest = min(scores[tuple(sorted(pair))] for pair in copies)
            print(f"   {label:20s} copying pairs at {ranks}; first pair of independent students at "
                  f"{ranked.index(honest[0]) + 1}; lowest copying pair / highest independent pair: {lowest:.2f} / "
                  f"{scores[honest[0]]:.2f} = {lowest / max(scores[honest[0]], 1e-9):.1f}; {seconds:.1f} s")


if __name__ == "__main__":
    main()
