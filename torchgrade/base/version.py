"""torchgrade's version: what results, ledgers, bundles and the autograder record of the engine that graded."""

__version__ = "0.1.0"
