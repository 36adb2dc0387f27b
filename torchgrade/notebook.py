"""The check inside a notebook: `%load_ext torchgrade`, `%torchgrade check ...`, `torchgrade.notebook.check(...)`.

It grades the cells the kernel has run as `torchgrade check` grades a saved notebook, in a process of
its own: a student's command line, in Jupyter or Colab (docs/notebooks.md).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from torchgrade.engine.notebooks import LABEL_KEY, notebook_text, rules

#: What `check` runs: the same command as a student's terminal, in a process of its own.
CHECK_COMMAND = ("-m", "torchgrade.cli", "check")


def history_notebook(inputs: list[str]) -> dict:
    """The cells a kernel has run (IPython's raw input history: index n is `In [n]`) as a notebook, each
    cell named by its prompt."""
    from nbformat import v4

    cells = []
    for number, source in enumerate(inputs):
        if number and source and source.strip():
            cells.append(v4.new_code_cell(source, metadata={LABEL_KEY: {"label": f"In [{number}]"}}))
    return v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                 "display_name": "Python 3"}})


@dataclass
class Verdicts:
    """What `check` found: the rows of results.json, the terminal's text, and the exit status."""

    rows: list[dict]
    text: str
    status: int
    score: float = 0.0
    max_score: float = 0.0
    notes: str = ""

    def __repr__(self) -> str:  # the text fallback (a terminal, a console, a notebook without HTML)
        return self.text

    def _repr_html_(self) -> str:
        from torchgrade.outputs.report import _env

        return _env.get_template("_notebook.html").render(v=self)

    @property
    def passed(self) -> bool:
        return self.status == 0


def check(*targets: str, assignment: str | Path | None = None, device: str = "all", lang: str | None = None,
          inputs: list[str] | None = None) -> Verdicts:
    """Grade the code this kernel has run so far with the course's visible checks, in the sandbox, as
    `torchgrade check TARGETS` grades the notebook saved with those cells; shows as HTML in a notebook.

    The cells come from IPython's record of executed input (`inputs` replaces it); they are written as a
    notebook into a temporary folder and graded by `torchgrade check` in a process of its own, so nothing
    of the kernel (its variables, modules, working folder) is touched."""
    import subprocess
    import sys

    from torchgrade.engine.config import exercise_named, find_assignment, load_assignment

    if inputs is None:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            raise RuntimeError("torchgrade.notebook.check runs inside Jupyter or Colab (an IPython kernel); "
                               "in a terminal, run `torchgrade check`")
        inputs = list(shell.history_manager.input_hist_raw)
    path = Path(assignment) if assignment is not None else find_assignment()
    course = load_assignment(path)
    wanted = {exercise_named(t) for t in targets} or {e.name for e in course.exercises if e.visibility == "visible"}
    names = {rules(course).file} if rules(course).file else {f"{name}.ipynb" for name in wanted}
    try:
        folder = Path(tempfile.mkdtemp(prefix=".torchgrade-kernel-", dir=course.root))
    except OSError:  # a course folder the kernel cannot write: the system's
        folder = Path(tempfile.mkdtemp(prefix="torchgrade-kernel-"))
    try:
        work = folder / "notebook"
        work.mkdir()
        text = notebook_text(history_notebook(inputs))
        for name in names:
            (work / name).write_text(text, encoding="utf-8")
        command = [sys.executable, *CHECK_COMMAND, *targets, "--path", str(work), "--report", str(folder / "report"),
                   "--assignment", str(course.path), "--device", device] + (["--lang", lang] if lang else [])
        done = subprocess.run(command, cwd=course.root, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        shown_text = "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                               if not line.startswith(("report:", "报告：")))
        results = folder / "report" / "results.json"
        data = json.loads(results.read_text(encoding="utf-8")) if done.returncode in (0, 1) and results.is_file() else {}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    extra = data.get("extra_data") or {}
    return Verdicts(rows=data.get("tests", []), text=shown_text.strip(), status=done.returncode,
                    score=float(data.get("score", 0.0)), max_score=float(extra.get("max_score", 0.0)),
                    notes=data.get("output", ""))


def load_ipython_extension(shell) -> None:
    """`%load_ext torchgrade`: the line magic `%torchgrade check [TARGET ...] [--device D] [--lang L]`."""
    import shlex

    def torchgrade(line: str) -> Verdicts:
        words = shlex.split(line)
        if not words or words[0] != "check":
            raise ValueError("usage: %torchgrade check [TARGET ...] [--device cpu|cuda|all] [--lang en|zh]")
        targets, options, rest = [], {}, iter(words[1:])
        for word in rest:
            if word in ("--device", "--lang", "--assignment"):
                options[word[2:]] = next(rest, "")
            else:
                targets.append(word)
        return check(*targets, **options)

    shell.register_magic_function(torchgrade, "line", "torchgrade")
