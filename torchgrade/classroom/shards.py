"""Splitting a class over machines (`--shard i/n`) and merging the shards' outputs into one class report.

A submission's shard is decided by a stable hash of its name alone, so every machine of a CI
matrix picks its share without talking to the others, whatever order it lists the class in, and
the n shards cover the class exactly once. `merge` copies each shard's per-student folders, joins
the ledgers, and writes the class pages as if the class had been graded in one run.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from torchgrade.engine import results
from torchgrade.outputs.exports import load_grade
from torchgrade.classroom.ledger import Ledger, Record
from torchgrade.engine.scoring import Grade
from torchgrade.classroom.submissions import Submission


class MergeError(Exception):
    """The shard folders do not fit together; the message says which and why."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (1-based, as in `--shard 2/4`)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """'i/n' with 1 <= i <= n; ValueError saying what is wrong."""
        try:
            i, n = (int(part) for part in text.split("/"))
        except ValueError:
            raise ValueError(f"'{text}' is not i/n (for example 1/4)") from None
        if n < 1 or not 1 <= i <= n:
            raise ValueError(f"'{text}': shards count from 1 to n (for example 1/{max(n, 1)} to {max(n, 1)}/{max(n, 1)})")
        return cls(i, n)

    def holds(self, name: str) -> bool:
        """Whether the submission called `name` belongs to this shard."""
        h = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")
        return h % self.count == self.index - 1

    def select(self, submissions: list[Submission]) -> list[Submission]:
        return [s for s in submissions if self.holds(s.name)]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def merge(shard_dirs: list[Path], out: Path) -> tuple[list[Grade], list[Record]]:
    """Copy every shard's graded submissions into `out`, join the ledgers; return the grades and records.

    MergeError when a folder has no ledger, when shards were graded by different graders, or when one
    submission name was graded from different content in two shards.
    """
    owner: dict[str, tuple[Path, Record]] = {}
    graders: dict[str, Path] = {}
    for folder in shard_dirs:
        if not Ledger(folder).path.is_file():
            raise MergeError(f"{folder}: no {Ledger(folder).path.name} (not a folder written by `torchgrade grade`)")
        for name, record in Ledger(folder).load().items():
            graders.setdefault(record.grader, folder)
            if len(graders) > 1:
                a, b = list(graders.values())[:2]
                raise MergeError(f"{a} and {b} were graded by different graders (assignment, checks, reference "
                                 "or torchgrade differ): grade every shard with the same version")
            if name in owner and owner[name][1].content != record.content:
                raise MergeError(f"{name} was graded from different files in {owner[name][0]} and {folder}")
            if not (folder / name / "results.json").is_file():
                raise MergeError(f"{folder / name / 'results.json'}: missing (the ledger lists it)")
            owner.setdefault(name, (folder, record))
    grades, records = [], []
    for name in sorted(owner):
        folder, record = owner[name]
        if (folder / name).resolve() != (out / name).resolve():
            shutil.copytree(folder / name, out / name, dirs_exist_ok=True)
            for path in (out / name).rglob("*"):  # the mode this run writes with (--private or not)
                if path.is_file():
                    path.chmod(results.FILE_MODE)
        grades.append(load_grade(out / name / "results.json"))
        records.append(record)
    Ledger(out).rewrite(records)
    return grades, records
