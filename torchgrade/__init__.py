"""torchgrade: differential grading of PyTorch exercises across a sandbox boundary."""

__version__ = "0.1.0"
