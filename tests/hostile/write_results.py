# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: write a perfect results.json, report.html, grades.csv (and a marker) into every folder
# in reach: the working folder and its parents, the grader's folders, /proc/*/cwd, temp folders.
# Holds from: unprivileged-user (the grader's folders are not writable; under bubblewrap they are
# not even visible, nor is the host's /tmp).
import json
import os

import hostile_kit as kit

_PERFECT = json.dumps({"score": 100.0, "max_score": 100.0, "tests": []})
_NAMES = {"results.json": _PERFECT, "report.html": "<h1>100 / 100</h1>", "grades.csv": "submission,score\nme,100\n",
          f"written-by-{kit.NONCE}": kit.NONCE}


def _write_everywhere():
    for folder in kit.places() + kit.CONFIG["folders"]:
        for name, text in _NAMES.items():
            try:
                with open(os.path.join(folder, name), "w") as f:
                    f.write(text)
            except OSError:
                pass


_write_everywhere()
_honest_gather = gather


def gather(x, dim, index):
    _write_everywhere()
    return kit.wrong(_honest_gather, x, dim, index)
