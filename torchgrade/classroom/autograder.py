"""Grading one submission on Gradescope: `torchgrade autograde`, what run_autograder runs.

The autograder's zip is built by torchgrade/outputs/gradescope.py. `autograde` fails closed: it
writes a score-0 results.json first, proves the isolation level in seconds (`prove_level`:
`unprivileged-user` or stronger unless the course's `gradescope_isolation` says `process`; at
`unprivileged-user` a Python run as the sandbox user must fail to read the course and the submission's
metadata, and to write results or the engine), and where it cannot, every target gets 0 with
MISCONFIGURED. The final results.json is written after every process of the sandbox user is dead.
`AUTOGRADER_ROOT` moves /autograder elsewhere (the tests grade in a temporary one). See SECURITY.md
("On Gradescope") and docs/exports.md.
"""

from __future__ import annotations

from pathlib import Path

from torchgrade.engine.config import Assignment
from torchgrade.engine.notebooks import module_names


def find_submission(folder: Path, exercises: tuple[str, ...]) -> Path:
    """Where the student's files are in Gradescope's submission folder: itself, the one folder that holds
    an exercise file, or a .zip uploaded as it is."""
    if any((folder / f"{name}{suffix}").is_file() for name in exercises for suffix in (".py", ".ipynb")):
        return folder
    nested = sorted((p for p in folder.rglob("*") if p.suffix in (".py", ".ipynb") and p.stem in exercises
                     and "__MACOSX" not in p.parts and ".ipynb_checkpoints" not in p.parts),
                    key=lambda p: (len(p.parts), str(p)))
    if nested:
        return nested[0].parent
    zips = sorted(folder.glob("*.zip"))
    return zips[0] if len(zips) == 1 else folder


# --- grading one submission on Gradescope (`torchgrade autograde`, what run_autograder runs) ---

#: The student's and the instructor's first line when the sandbox Gradescope gave cannot be proven.
MISCONFIGURED = ("The autograder is misconfigured: {why}. This submission was not graded (score 0). "
                 "Instructors: see \"Gradescope\" in torchgrade's docs/exports.md (torchgrade {version}).")
#: What stays in results.json if grading is stopped before it writes the real one (a timeout, a kill).
UNFINISHED = ("Grading did not finish: the autograder was stopped before it wrote this submission's results "
              "(score 0). Resubmit; if it happens again, tell your instructor.")
#: The first line of the student's output (and of the instructor's log) once the level is proven.
GRADED_AT = "Graded by torchgrade {version} at sandbox isolation level '{level}'."
PROCESS_NOTE = (" The course chose level 'process' (gradescope_isolation): this code ran with the grader's own "
                "rights, without a sandbox user.")

#: Run as the sandbox user: can it run Python, and what of `read` can it read and of `write` can it write?
_PROOF = r"""
import json, os, sys
read, write = json.loads(sys.argv[1])
found = []
for path in read:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").close()
        found.append("read " + path)
    except OSError:
        pass
for path in write:
    try:
        if os.path.isdir(path):
            name = os.path.join(path, ".torchgrade-proof-%d" % os.getpid())
            open(name, "xb").close()
            os.unlink(name)
        else:
            open(path, "ab").close()  # appends nothing: the file stays as it was
        found.append("write " + path)
    except OSError:
        pass
print(json.dumps(found))
"""


class Misconfigured(Exception):
    """The sandbox this container gives cannot be proven to keep student code in its place."""


def placeholder(assignment: Assignment, why: str, level: str = "none") -> dict:
    """A results.json of score 0 in which every target says why (what stays if grading stops here)."""
    from torchgrade.classroom.batch import error_grade
    from torchgrade.engine.results import results_document

    grade = error_grade("submission", assignment, why, "submission could be graded")
    grade.isolation = level
    return results_document(grade, assignment)


def write_document(path: Path, document: dict) -> None:
    import json

    from torchgrade.engine.results import write_atomic

    write_atomic(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def acceptable_levels(assignment: Assignment) -> tuple[str, ...]:
    """The isolation levels, strongest first, down to the weakest the course accepts on Gradescope."""
    from torchgrade.sandbox.isolation import LEVELS

    return LEVELS[: LEVELS.index(assignment.gradescope_isolation) + 1]


def _course_secrets(assignment: Assignment) -> list[Path]:
    return [assignment.reference_dir, assignment.checks_dir, assignment.path, assignment.hints_file]


def _files(paths: list[Path], limit: int = 200) -> list[str]:
    """The paths, and for folders the files in them (as many as `limit`): what the proof tries one by one."""
    found: list[str] = []
    for path in paths:
        if not path.exists():
            continue
        found.append(str(path))
        if path.is_dir():
            found += [str(p) for p in sorted(path.rglob("*"))[:limit]]
    return found


def prove_confined(user: tuple[int, int], read: list[Path], write: list[Path]) -> list[str]:
    """Run Python as the sandbox user; what of `read` it could read and of `write` it could write
    (an empty list: nothing). Misconfigured if it cannot run Python at all."""
    import json
    import subprocess
    import sys

    uid, gid = user
    try:
        done = subprocess.run([sys.executable, "-S", "-I", "-c", _PROOF, json.dumps([_files(read), _files(write)])],
                              user=uid, group=gid, extra_groups=[], env={"PATH": "/usr/bin:/bin"}, cwd="/",
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        raise Misconfigured(f"the sandbox user (uid {uid}) cannot run Python here ({type(e).__name__}: {e})") from None
    if done.returncode != 0:
        why = " ".join(done.stderr.split())[-300:] or f"exit status {done.returncode}"
        raise Misconfigured(f"the sandbox user (uid {uid}) cannot run Python here ({why})")
    return json.loads(done.stdout)


def prove_level(assignment: Assignment, secrets: list[Path], protected: list[Path]) -> str:
    """The strongest isolation level the course accepts that works here, proven in seconds, before any
    student code runs: a sandbox starts at it, and at `unprivileged-user` its user runs Python and can
    neither read the course (nor `secrets`) nor write `protected`. Misconfigured if none can be proven.

    Every sandbox of the run then demands that level (TORCHGRADE_ISOLATION): none falls back to another.
    """
    import os

    from torchgrade.sandbox import host, isolation

    reasons = []
    host.use_course(assignment.probes_dir)
    for level in acceptable_levels(assignment):
        try:
            host.choose_level(level)  # a sandbox that starts, switches to its user, checks it can read Python
        except isolation.IsolationError as e:
            why = " ".join(str(e).split()).replace(f"; unset {isolation.ENV_VAR} to use the best available", "")
            user = isolation.sandbox_user()
            if level == "unprivileged-user" and user is not None and ("[Errno 1]" in why or "[Errno 22]" in why):
                # the switch of user itself was refused: most often a uid-remapped container
                why += (f" (the sandbox user is uid {user[0]}: a container whose user namespace does not map it, as "
                        f"with Docker's user-namespace remapping or rootless Docker, cannot switch to it)")
            reasons.append(why[:600])
            continue
        user = isolation.sandbox_user()
        if level == "unprivileged-user" and user is not None:
            leaks = prove_confined(user, [*_course_secrets(assignment), *secrets], protected)
            if leaks:
                raise Misconfigured(f"at isolation level '{level}' the sandbox user can {', '.join(leaks[:5])}"
                                    f"{' ...' if len(leaks) > 5 else ''} (run_autograder's chmod did not apply?)")
        os.environ[isolation.ENV_VAR] = level
        return level
    raise Misconfigured(f"no sandbox at isolation level '{assignment.gradescope_isolation}' or stronger could be "
                        f"started in this container ({'; '.join(reasons)}); a course that accepts student code "
                        f"running as root sets gradescope_isolation: process in its assignment file")


def sweep(user: tuple[int, int] | None) -> int:
    """Kill every process the sandbox user still has (a worker's leftovers); how many there were."""
    import psutil

    if user is None:
        return 0
    left = []
    for process in psutil.process_iter(["uids"]):
        uids = process.info.get("uids")
        if uids is not None and user[0] in (uids.real, uids.effective, uids.saved):
            left.append(process)
    for process in left:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=10)
    return len(left)


def _say(line: str) -> None:
    import click

    click.echo(line)


def _limit(assignment: Assignment, metadata: Path | None):
    """(verdict, note) of the course's submission limit for this submission (torchgrade/engine/submission_limits.py):
    no verdict where there is no limit, or the metadata cannot be read (then the note says so)."""
    from torchgrade.engine import submission_limits as limits

    limit = assignment.submission_limit
    if limit is None:
        return None, ""
    try:
        if metadata is None or not metadata.is_file():
            raise ValueError("is missing")
        return limits.decide(limit, limits.read_metadata(metadata)), ""
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        why = str(e) if str(e) == "is missing" else f"cannot be read ({type(e).__name__}: {e})"
        return None, (f"Note: the submission limit ({limit}) was not applied: Gradescope's submission_metadata.json "
                      f"{why}; this submission was graded and counts.")


def autograde(submission: Path, results_path: Path, device: str, assignment: Assignment, secrets: list[Path],
              protected: list[Path], smoke: bool = False, outcomes: Path | None = None,
              metadata: Path | None = None) -> int:
    """Grade one Gradescope submission into results_path; the exit status.

    Fail closed: a score-0 results.json is written before anything else, and replaced only once the
    level is proven (else by MISCONFIGURED) and, at the end, after every process of the sandbox user
    is dead. A grader stopped on the way leaves the score-0 one, never one the student's code wrote
    (at the levels Gradescope accepts by default, the student's code cannot write there at all).
    `smoke`: the build's test (setup.sh grades the reference): exit 1 unless every check passed.
    `metadata`: Gradescope's submission_metadata.json, for the course's submission_limit: a submission over
    it is not graded and keeps the last counted one's results (torchgrade/engine/submission_limits.py).
    """
    import sys

    from torchgrade.base.version import __version__
    from torchgrade.engine import grader_errors, refcache
    from torchgrade.classroom.batch import grade_one
    from torchgrade.engine.grading import GradingError
    from torchgrade.engine.results import results_document
    from torchgrade.sandbox import host, isolation
    from torchgrade.classroom.submissions import Submission

    results_path.parent.mkdir(parents=True, exist_ok=True)
    write_document(results_path, placeholder(assignment, UNFINISHED))
    if outcomes is not None:  # root's only before the proof, which checks that the sandbox user cannot read it
        outcomes.mkdir(parents=True, exist_ok=True)
        outcomes.chmod(0o700)
    verdict, limit_note = _limit(assignment, metadata) if not smoke else (None, "")
    if verdict is not None and not verdict.counted:  # before any student code: nothing of it runs
        from torchgrade.engine.submission_limits import over_limit_document

        document = over_limit_document(verdict, assignment.submission_limit,
                                       placeholder(assignment, "not graded: over the submission limit"))
        write_document(results_path, document)
        _say(document["output"].splitlines()[0])
        return 0
    user = isolation.sandbox_user()
    try:
        level = prove_level(assignment, secrets, [results_path.parent, *protected])
    except Misconfigured as e:
        message = MISCONFIGURED.format(why=e, version=__version__)
        _say(message)
        write_document(results_path, placeholder(assignment, message))
        return 1 if smoke else 0
    head = GRADED_AT.format(version=__version__, level=level) + (PROCESS_NOTE if level == "process" else "")
    _say(head)
    found = find_submission(submission, module_names(assignment))
    host.start_early(assignment.probes_dir)
    if outcomes is not None:  # in this trusted process, before any student code: the reference side
        _say(f"reference outcomes ({outcomes}): {refcache.ensure(assignment, device, outcomes)}")
    grader_errors.reset()
    try:
        grade = grade_one(Submission("submission", found), assignment, device)
        if grader_errors.FAULTS:  # the installation failed without the student's code: fail closed, as misconfigured
            raise GradingError(grader_errors.FAULTS[0])
    except GradingError as e:
        message = MISCONFIGURED.format(why=" ".join(str(e).split()), version=__version__)
        _say(message)
        write_document(results_path, placeholder(assignment, message, level))
        return 1 if smoke else 0
    finally:
        host.close_all()
        left = sweep(user if level != "process" else None)
    if left:
        _say(f"killed {left} process(es) the submission left behind")
    counted = ""
    if verdict is not None:
        counted = f"Counted submission {verdict.used} of {assignment.submission_limit}."
    grade.output = "\n".join(part for part in (head, counted, limit_note, grade.output) if part)
    document = results_document(grade, assignment)
    if verdict is not None:  # so that later counts see this one counted
        from torchgrade.engine.submission_limits import counted_mark

        document["extra_data"]["submission_limit"] = counted_mark(verdict, assignment.submission_limit)
    write_document(results_path, document)
    _say(f"graded {found}: {grade.score:g} / {grade.max_score:g} (isolation: {grade.isolation})")
    if smoke and grade.score < grade.max_score:
        failed = [t for t in grade.tests if t.status in ("failed", "error")]
        for t in failed[:10]:
            print(f"  {t.name}: {t.output.splitlines()[0] if t.output else t.status}", file=sys.stderr)
        print(f"torchgrade: the reference does not score full marks here ({grade.score:g} / {grade.max_score:g}, "
              f"{len(failed)} check(s) did not pass): the autograder would grade students wrongly", file=sys.stderr)
        return 1
    return 0
