"""torchgrade: differential grading of PyTorch exercises across a sandbox boundary."""

__version__ = "0.1.0"


def load_ipython_extension(shell) -> None:
    """`%load_ext torchgrade` in Jupyter or Colab: the `%torchgrade check ...` magic (torchgrade/notebook.py)."""
    from .notebook import load_ipython_extension as load

    load(shell)


def __getattr__(name: str):
    """`import torchgrade` then `torchgrade.notebook.check(...)`: the submodule on first use (PEP 562)."""
    if name == "notebook":
        import importlib

        return importlib.import_module(".notebook", __name__)
    raise AttributeError(f"module 'torchgrade' has no attribute {name!r}")
