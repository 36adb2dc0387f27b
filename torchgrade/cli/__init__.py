"""The `torchgrade` command (``main``): check (students), grade (instructors), stubs and audit (course authors).

It is the top of the package: it may import every wing. ``common.py`` holds the command group and
what the commands share; each other module registers its commands on it when imported here.
"""

from torchgrade.cli import authoring, classroom, student  # noqa: F401  (each registers its commands on `main`)
from torchgrade.cli.common import main

__all__ = ["main"]
