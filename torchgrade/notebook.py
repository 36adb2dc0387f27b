"""The check inside a notebook: `%load_ext torchgrade`, `%torchgrade check ...`, `torchgrade.notebook.check(...)`.

It grades the cells the kernel has run as `torchgrade check` grades a saved notebook, in a process of
its own: a student's command line, in Jupyter or Colab (docs/notebooks.md).

That process is a warm checker, one per kernel and course: started by the first check, it keeps what
makes a check slow to start (Python, torch, the checks collected in one pytest session, the sandbox's
zygote, the reference's outcomes), as `torchgrade check --watch` does, and grades each later check
cell with them. It is started again when the course's files change (by their digest) and ends when
the kernel ends (its end of the pipe closes). The kernel holds only the pipe: nothing of the grading
runs in it, so its variables, modules and working folder are never touched.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from torchgrade.engine.notebooks import LABEL_KEY, notebook_text, rules

#: What a rerun line in the notebook starts with: the magic, run where the student is.
MAGIC_COMMAND = "%torchgrade check"


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
    #: The `%torchgrade check ...` line that runs one failing check again, by its row's name.
    reruns: dict[str, str] = field(default_factory=dict)
    #: The warm checker that graded it (its process id) and how many checks it had graded with this one.
    checker: int = 0
    served: int = 0

    def __repr__(self) -> str:  # the text fallback (a terminal, a console, a notebook without HTML)
        return self.text

    def _repr_html_(self) -> str:
        from torchgrade.outputs.report import _env

        return _env.get_template("_notebook.html").render(v=self)

    @property
    def passed(self) -> bool:
        return self.status == 0


# --- the kernel's side: one warm checker per course ---

def course_digest(assignment) -> str:
    """A digest of the course's files a check reads (assignment file, checks, probes, hints, reference or
    recorded outcomes): when it changes, the warm checker is started again."""
    digest = hashlib.sha256()
    roots = [assignment.path, assignment.checks_dir, assignment.probes_dir, assignment.hints_file,
             assignment.reference_dir]
    for root in roots:
        paths = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in paths:
            if "__pycache__" in path.parts or not path.is_file():
                continue
            try:
                digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
            except OSError:
                digest.update(str(path).encode() + b"\0unreadable\0")
    return digest.hexdigest()


class CheckerError(Exception):
    """The warm checker ended without an answer; the message holds what it last said."""


class Checker:
    """A warm checker: `python -m torchgrade.notebook ASSIGNMENT`, one JSON line in and out per check."""

    def __init__(self, assignment, digest: str):
        self.digest = digest
        self.served = 0
        self._log = tempfile.TemporaryFile()  # its stderr: read back only when it ends without an answer
        self.process = subprocess.Popen([sys.executable, "-m", "torchgrade.notebook", str(assignment.path)],
                                        cwd=assignment.root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._log, text=True, encoding="utf-8")

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def ask(self, request: dict) -> dict:
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except (OSError, ValueError):
            line = ""
        if not line:
            self.close()
            self._log.seek(0)
            said = self._log.read().decode("utf-8", "replace").strip().splitlines()[-5:]
            raise CheckerError("the checker stopped before it answered" + (": " + " | ".join(said) if said else ""))
        self.served += 1
        return json.loads(line)

    def close(self) -> None:
        """End it: its input closes, it closes its sandbox and exits (killed if it does not within 10 s)."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


#: This kernel's warm checkers, by assignment file.
_checkers: dict[str, Checker] = {}


def checker_for(assignment) -> Checker:
    """This kernel's warm checker for the course: the running one, or a new one where there is none, it
    ended, or the course's files changed since it started."""
    digest = course_digest(assignment)
    key = str(assignment.path)
    running = _checkers.get(key)
    if running is not None and running.alive() and running.digest == digest:
        return running
    if running is not None:
        running.close()
    _checkers[key] = Checker(assignment, digest)
    return _checkers[key]


@atexit.register
def close_checkers() -> None:
    """End every warm checker of this kernel (at its end; a kernel killed outright closes their pipes)."""
    while _checkers:
        _checkers.popitem()[1].close()


def check(*targets: str, assignment: str | Path | None = None, device: str = "all", lang: str | None = None,
          inputs: list[str] | None = None) -> Verdicts:
    """Grade the code this kernel has run so far with the course's visible checks, in the sandbox, as
    `torchgrade check TARGETS` grades the notebook saved with those cells; shows as HTML in a notebook.

    The cells come from IPython's record of executed input (`inputs` replaces it); they go, as a
    notebook, to this kernel's warm checker, a process of its own, so nothing of the kernel (its
    variables, modules, working folder) is touched."""
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
    names = sorted({rules(course).file} if rules(course).file else {f"{name}.ipynb" for name in wanted})
    request = {"targets": list(targets), "device": device, "lang": lang, "names": names,
               "notebook": notebook_text(history_notebook(inputs))}
    running = checker_for(course)
    try:
        reply = running.ask(request)
    except CheckerError as e:
        _checkers.pop(str(course.path), None)
        return Verdicts(rows=[], text=f"torchgrade: error: {e}", status=2)
    except KeyboardInterrupt:  # the cell was interrupted: its answer would come to the next check, so no next
        _checkers.pop(str(course.path), None)
        running.close()
        raise
    if reply.get("restart"):  # the grader itself failed: the next check starts a fresh checker
        _checkers.pop(str(course.path), None)
        running.close()
    data = reply.get("results") or {}
    extra = data.get("extra_data") or {}
    return Verdicts(rows=data.get("tests", []), text=reply.get("text", "").strip(), status=reply["status"],
                    score=float(data.get("score", 0.0)), max_score=float(extra.get("max_score", 0.0)),
                    notes=data.get("output", ""), reruns=reply.get("reruns", {}), checker=running.pid,
                    served=running.served)


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


# --- the warm checker's side ---

class _Grader:
    """What the warm checker keeps between checks: the course, and one collected session per device."""

    def __init__(self, assignment_path: str):
        from torchgrade.engine.config import load_assignment
        from torchgrade.sandbox.host import start_early

        self.assignment = load_assignment(assignment_path)
        # the sandbox imports torch while this process imports the rest and collects the checks
        start_early(self.assignment.probes_dir)
        self.sessions: dict = {}
        self.course_checked: str | None = None

    def grade(self, request: dict) -> dict:
        from torchgrade.engine.course import course_notes, target_mistake, validate_course, CourseError
        from torchgrade.engine.grading import GradingError
        from torchgrade.engine.i18n import set_language
        from torchgrade.sandbox import host

        set_language(request.get("lang") or None)
        targets = tuple(request.get("targets") or ())
        if self.course_checked is None:
            try:
                validate_course(self.assignment, collect=False)
                self.course_checked = "\n".join(f"torchgrade: note: {n}" for n in course_notes(self.assignment))
            except CourseError as e:
                return {"status": 2, "text": f"torchgrade: error: {e}", "restart": True}
        mistake = target_mistake(self.assignment, targets)
        if mistake:
            return {"status": 2, "text": f"torchgrade: error: {mistake}"}
        try:
            return self._grade(request, targets)
        except host.IsolationError as e:
            from torchgrade.engine.i18n import t

            return {"status": 2, "text": "torchgrade: error: " + t("sandbox_unavailable", why=" ".join(str(e).split())),
                    "restart": True}
        except GradingError as e:
            self.close()
            return {"status": 2, "text": f"torchgrade: error: {e}", "restart": True}

    def _grade(self, request: dict, targets: tuple[str, ...]) -> dict:
        import click

        from torchgrade.engine import grader_errors, plugin, refcache
        from torchgrade.engine.config import exercise_named
        from torchgrade.engine.notebooks import graded_folder
        from torchgrade.engine.results import results_document
        from torchgrade.engine.session import CheckSession
        from torchgrade.outputs import feedback, terminal
        from torchgrade.sandbox import host, isolation

        assignment, device = self.assignment, request.get("device") or "all"
        folder = Path(tempfile.mkdtemp(prefix="torchgrade-kernel-"))
        try:
            work = folder / "notebook"
            work.mkdir()
            for name in request["names"]:
                (work / Path(name).name).write_text(request["notebook"], encoding="utf-8")
            level = host.isolation_level(isolation.requested_level())
            with refcache.kept(assignment, device, level), graded_folder(work, assignment) as (graded, notes):
                session = self.sessions.get(device)
                if session is None:
                    visible = tuple(e.name for e in assignment.exercises if e.visibility == "visible")
                    session = self.sessions[device] = CheckSession(assignment, device=device, include_hidden=False,
                                                                   only=visible)
                session.open()
                host.started()
                select = (lambda item: any(plugin._selected(item, t) for t in targets)) if targets else None
                grade = session.grade(graded, {exercise_named(t) for t in targets} or None, select)
                grade.output = "\n".join([*notes, grade.output]).strip()
            host.warm_zygotes()  # every later check starts its workers from a fully warmed zygote
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if grader_errors.FAULTS:  # the installation's fault, met without the student's code
            return {"status": 2, "text": f"torchgrade: error: {grader_errors.FAULTS[0]}", "restart": True}
        view = feedback.build(grade, assignment, command=MAGIC_COMMAND)
        lines = [f"torchgrade: note: {note}" for note in notes] + \
            [click.unstyle(line).rstrip() for line in terminal.render(view)]
        reruns = {c.result.name: c.rerun for e in view.exercises for tv in e.targets for c in tv.checks if c.rerun}
        failed = any(c.status in ("failed", "error") for c in grade.tests)
        return {"status": 1 if failed else 0, "text": "\n".join(lines), "reruns": reruns,
                "results": results_document(grade, assignment), "pid": os.getpid()}

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        self.sessions.clear()


def serve(assignment_path: str) -> None:
    """The warm checker: a JSON request per line on stdin, a JSON answer per line, until stdin closes."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever else prints (a check, a library) goes to stderr, never into the answers
    grader = _Grader(assignment_path)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                reply = grader.grade(json.loads(line))
            except Exception as e:  # the grader's own failure: said, and the next check starts a fresh checker
                reply = {"status": 2, "text": f"torchgrade: error: the checker failed: {type(e).__name__}: {e}",
                         "restart": True}
            answers.write(json.dumps(reply) + "\n")
            answers.flush()
    finally:
        grader.close()
        from torchgrade.sandbox import host

        host.close_all()


if __name__ == "__main__":
    serve(sys.argv[1])
