"""torchgrade: differential grading of PyTorch exercises across a sandbox boundary.

The package is built in wings, each importing only those beneath it (`lint-imports` checks it; the
contracts are in pyproject.toml, the picture in docs/how-it-works.md):

- ``cli.py``, ``notebook.py``  the command line and the in-notebook check, on top;
- ``authoring/``  init, stubs, student notebooks, bundle, audit, mutants, verification;
- ``classroom/``  class grading: folders, batches, shards, executors, ledger, decisions, similarity,
  the Gradescope autograder's run;
- ``outputs/``    what grades become: results' words, reports, exports, LMS gradebooks, the autograder's build;
- ``engine/``     collecting and running checks, comparing, scoring, results.json;
- ``sandbox/``    the trust boundary: only it touches student code;
- ``base/``       what every wing may use: the version, the cache folder, names fit to print.

``torchgrade.probes`` and ``torchgrade.plugin`` are the names courses use; they re-export the engine's.
"""

from torchgrade.base.version import __version__

__all__ = ["__version__", "load_ipython_extension"]


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
