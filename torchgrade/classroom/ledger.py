"""Resume records: which submission was graded, from which content, by which grader.

`DIR/ledger.jsonl` gets one JSON line per graded submission, appended and fsynced right after the
submission's results.json and report.html are in place. A re-run skips a submission whose name,
content hash and grader key match a record whose results.json exists. A run killed at any point
leaves either a complete line or a torn last line, which is ignored (and cut off before the next
append), so nothing is lost and nothing is counted twice: at worst the submission that was being
written is graded again and its files replaced.

The grader key (torchgrade/engine/fingerprint.py) hashes what decides a result besides the
submission: torchgrade's version, the assignment file, the checks and the probes they run, the
reference, the device choice. A change to any of them regrades; a change to torchgrade's own code
counts through its version (`torchgrade.__version__`), so while developing torchgrade itself, use `--force`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from torchgrade.base.printable import utf8

LEDGER_NAME = "ledger.jsonl"


@dataclass(frozen=True)
class Record:
    """One graded submission, as the ledger keeps it."""

    #: The submission's name: its folder under DIR.
    name: str
    #: sha256 of the submission's files (see torchgrade.classroom.submissions.content_hash).
    content: str
    #: The grader key it was graded with (see grader_key).
    grader: str
    score: float
    max_score: float
    #: Checks with status "error" (crashes, timeouts, a worker that died).
    errors: int = 0
    #: Seconds the grade took, and the seconds its checks took per exercise.
    seconds: float = 0.0
    exercise_seconds: dict[str, float] = field(default_factory=dict)


_TEXT_FIELDS = ("name", "content", "grader")
_NUMBER_FIELDS = ("score", "max_score", "seconds")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_record(line: bytes) -> Record | None:
    """One ledger line as a Record, or None when it is damaged in any way (a kill, a disk, a hand edit)."""
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) - set(Record.__dataclass_fields__):
        return None
    if not all(isinstance(data.get(k), str) for k in _TEXT_FIELDS):
        return None
    if not all(_number(data[k]) for k in _NUMBER_FIELDS if k in data) or "score" not in data or "max_score" not in data:
        return None
    errors, per = data.get("errors", 0), data.get("exercise_seconds", {})
    if not isinstance(errors, int) or isinstance(errors, bool) or not isinstance(per, dict) \
            or not all(isinstance(k, str) and _number(v) for k, v in per.items()):
        return None
    name = data["name"]
    # The name is a folder under DIR: one that could lead elsewhere is not a record torchgrade wrote.
    if not name or name.startswith(".") or "/" in name or "\\" in name or "\0" in name:
        return None
    return Record(**data)


class Ledger:
    """The append-only record of graded submissions in one output folder."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / LEDGER_NAME

    def load(self) -> dict[str, Record]:
        """The latest sound record per submission name: a line that is torn, not UTF-8, not JSON or has a
        field of the wrong type is ignored (that submission is graded again)."""
        records: dict[str, Record] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return records
        for line in data.split(b"\n"):
            record = parse_record(line)
            if record is not None:
                records[record.name] = record
        return records

    def append(self, record: Record) -> None:
        """Add one record durably: after this returns, a kill cannot lose it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(asdict(record), sort_keys=True, ensure_ascii=False) + "\n"
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell():
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")  # end a line torn by a kill, so this record starts on its own
            f.write(utf8(line))
            f.flush()
            os.fsync(f.fileno())

    def rewrite(self, records: Iterable[Record]) -> None:
        """Replace the ledger with exactly these records (atomically), one line each."""
        from torchgrade.engine.results import write_atomic

        write_atomic(self.path, "".join(json.dumps(asdict(r), sort_keys=True, ensure_ascii=False) + "\n"
                                        for r in records))
