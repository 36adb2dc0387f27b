"""Hostile notebooks: an exercise's `.ipynb` that costs the trusted process (which reads it) memory, time or its stack.

Each is a notebook of format 4 under torchgrade's size limit whose first code cell is the reference's
module (so every target would be right) and whose rest is the attack:

- ``huge_literal``: a code cell holding a 5 MB list literal (parsing it made a 2.8 GB syntax tree);
- ``many_outputs``: 5000 cells carrying 340,000 outputs (validated and converted, twice: 77 s);
- ``deep_nesting``: JSON nested 50,000 deep in a cell's metadata (`RecursionError` in `json.loads`).

The grader must read each within bounds, make it that module's error row (the other modules keep
their marks) and say why in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cell(source: str, outputs: list | None = None, metadata: str = "{}") -> str:
    return ('{"cell_type": "code", "execution_count": null, "metadata": %s, "outputs": %s, "source": %s}'
            % (metadata, json.dumps(outputs or []), json.dumps(source)))


def _notebook(cells: list[str]) -> str:
    return ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", '
            '"language": "python", "display_name": "Python 3"}}, "cells": [%s]}' % ", ".join(cells))


def _reference(module: str) -> str:
    return _cell((ROOT / "reference" / f"{module}.py").read_text())


def huge_literal(module: str) -> str:
    return _notebook([_reference(module), _cell("BIG = [" + "1, " * 1_700_000 + "]\n")])


def many_outputs(module: str) -> str:
    output = {"output_type": "stream", "name": "stdout", "text": ""}
    return _notebook([_reference(module)] + [_cell(f"x{i} = {i}\n", [output] * 68) for i in range(4999)])


def deep_nesting(module: str) -> str:
    return _notebook([_reference(module), _cell("x = 1\n", metadata='{"deep": ' + "[" * 50_000 + "]" * 50_000 + "}")])


#: {attack: (the module whose notebook it is, its text)}: one submission holds all three, beside `.py` modules.
NOTEBOOKS = {"huge_literal": "autograd", "many_outputs": "functions", "deep_nesting": "tensors"}
BUILD = {"huge_literal": huge_literal, "many_outputs": many_outputs, "deep_nesting": deep_nesting}


def write(folder: Path) -> Path:
    """The hostile notebooks into `folder` (a copy of the reference), in place of their modules' `.py`."""
    for attack, module in NOTEBOOKS.items():
        (folder / f"{module}.py").unlink(missing_ok=True)
        (folder / f"{module}.ipynb").write_text(BUILD[attack](module))
    return folder
