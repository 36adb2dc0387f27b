"""torchgrade: differential grading of PyTorch exercises across a sandbox boundary.

The package is built in wings, each importing only those beneath it (`lint-imports` checks it; the
contracts are in pyproject.toml, the picture in docs/how-it-works.md):

- ``cli/``, ``notebook.py``  the command line and the in-notebook check, on top;
- ``authoring/``  init, stubs, student notebooks, bundle, audit, mutants, verification;
- ``classroom/``  class grading: folders, batches, shards, executors, ledger, decisions, similarity,
  the Gradescope autograder's run;
- ``outputs/``    what grades become: results' words, reports, exports, LMS gradebooks, the autograder's build;
- ``engine/``     collecting and running checks, comparing, scoring, results.json;
- ``sandbox/``    the trust boundary: only it touches student code;
- ``base/``       what every wing may use: the version, the cache folder, names fit to print.

``torchgrade.probes`` and ``torchgrade.plugin`` are the names courses use; they re-export the engine's.
A module name from before the wings (``torchgrade.differential``) is the module it became
(``torchgrade/base/moved.py``), through the finder below.
"""

import importlib
import importlib.abc
import importlib.util
import sys

from torchgrade.base.moved import MOVED
from torchgrade.base.version import __version__

__all__ = ["__version__", "load_ipython_extension"]


class _OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import torchgrade.differential` (a name from before the wings) gives `torchgrade.engine.differential`
    itself: one module object under both names (torchgrade/base/moved.py)."""

    def find_spec(self, name, path=None, target=None):
        if name.startswith("torchgrade.") and name[len("torchgrade."):] in MOVED:
            return importlib.util.spec_from_loader(name, self)
        return None

    def __init__(self) -> None:
        self._specs: dict[str, object] = {}

    def create_module(self, spec):
        module = importlib.import_module("torchgrade." + MOVED[spec.name[len("torchgrade."):]])
        self._specs[spec.name] = module.__spec__  # (the import system sets the alias's spec on it next)
        return module

    def exec_module(self, module) -> None:
        # the module ran under its own name; it keeps its own spec (reload, importlib.resources read it)
        module.__spec__ = self._specs.pop(module.__spec__.name, module.__spec__)


if not any(isinstance(finder, _OldNames) for finder in sys.meta_path):
    # first: an old name inside a moved package (torchgrade.executors.local) must not load a second copy
    sys.meta_path.insert(0, _OldNames())


def load_ipython_extension(shell) -> None:
    """`%load_ext torchgrade` in Jupyter or Colab: the `%torchgrade check ...` magic (torchgrade/notebook.py)."""
    import torchgrade.notebook

    torchgrade.notebook.load_ipython_extension(shell)


def __getattr__(name: str):
    """`import torchgrade` then `torchgrade.notebook.check(...)`: the submodule on first use (PEP 562)."""
    if name == "notebook":
        import torchgrade.notebook

        return torchgrade.notebook
    raise AttributeError(f"module 'torchgrade' has no attribute {name!r}")
