"""Where torchgrade's own files are, and the one cache folder it keeps per user."""

from __future__ import annotations

import os
from pathlib import Path

#: The installed package (the folder holding `engine/`, `sandbox/`, `templates/`, `checks.ini`).
PACKAGE = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    """TORCHGRADE_CACHE_DIR, else $XDG_CACHE_HOME/torchgrade, else ~/.cache/torchgrade."""
    if os.environ.get("TORCHGRADE_CACHE_DIR"):
        return Path(os.environ["TORCHGRADE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "torchgrade"
