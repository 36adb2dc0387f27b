"""The pytest plugin under the name a course's own pytest configuration may give it (``-p torchgrade.plugin``).

The plugin is torchgrade/engine/plugin.py (torchgrade's checks.ini names it there); this module
re-exports its hooks and its ``check`` fixture.
"""

from torchgrade.engine.plugin import *  # noqa: F401,F403  (pytest finds hooks and the `check` fixture by name)
