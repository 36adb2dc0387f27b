"""The attackers' toolbox: copied into every hostile submission as ``hostile_kit.py`` (never run by the tests).

It reads ``attack.json`` (written by the test next to it: a nonce, folders the grader cares about,
a port) and offers what a determined student would write: search the disk, /proc and the
environment, start processes that outlive their parent, load a function from a file found.
"""

import importlib.util
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "attack.json")) as _f:
    CONFIG = json.load(_f)
NONCE = CONFIG["nonce"]
#: The name (/proc/PID/comm) of every process an attack starts, so the test can look for survivors.
MARK = "tgh" + NONCE[:12]


def name_process():
    import ctypes

    ctypes.CDLL(None).prctl(15, MARK.encode(), 0, 0, 0)  # PR_SET_NAME: what /proc/PID/comm shows


def daemon(body):
    """Run body() in a double-forked, setsid'd, renamed process whose parent exits at once."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                name_process()
                try:
                    body()
                finally:
                    os._exit(0)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def ancestors():
    chain, pid = [], os.getppid()
    while pid > 1 and pid not in chain:
        chain.append(pid)
        pid = parent_of(pid)
    return chain


def quietly(fn, *args, **kwargs):
    """fn(*args, **kwargs), or None if it raised: an attack's forbidden call whose result it throws away."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        return None


def read(path, limit=1 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def places():
    """Folders worth a look: where this runs, where every visible process runs, what they were given."""
    found = [os.getcwd(), HERE, os.path.expanduser("~"), tempfile.gettempdir(), "/tmp", "/work", "/home", "/root"]
    for start in (os.getcwd(), HERE):
        path = start
        while path != os.path.dirname(path):
            path = os.path.dirname(path)
            found.append(path)
    for pid in pids():
        try:
            found.append(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            pass
        for arg in read(f"/proc/{pid}/cmdline").split(b"\0"):
            arg = arg.decode(errors="replace")
            if arg.startswith("/"):
                found += [arg, os.path.dirname(arg), os.path.dirname(os.path.dirname(arg))]
    try:
        import torchgrade

        package = os.path.dirname(torchgrade.__file__)
        found += [package, os.path.dirname(package)]
    except ImportError:
        pass
    found += [v for v in CONFIG.get("folders", [])]
    seen, unique = set(), []
    for path in found:
        if path and path not in seen and os.path.isdir(path):
            seen.add(path)
            unique.append(path)
    return unique


def find_files(name, budget_s=1.0):
    """Files called `name` near the places above (then anywhere), newest search first; not our own."""
    deadline = time.monotonic() + budget_s
    own = os.path.realpath(HERE)
    found, seen = [], set()
    skip = ("site-packages", "dist-packages", "/proc", "/sys", "/dev", "/usr", ".git", "node_modules")
    for top in places() + ["/"]:
        for root, dirs, files in os.walk(top):
            if time.monotonic() > deadline:
                return found
            if any(s in root for s in skip) or os.path.realpath(root) == own:
                dirs[:] = []
                continue
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("proc", "sys", "dev", "usr")]
            if name in files:
                path = os.path.realpath(os.path.join(root, name))
                if path not in seen:
                    seen.add(path)
                    found.append(path)
    return found


def load(path, attribute):
    """`attribute` of the module at `path`, imported afresh under a name of its own."""
    spec = importlib.util.spec_from_file_location(f"stolen_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, attribute)


def wrong(honest, *args, **kwargs):
    """What `honest` returns for these arguments, made wrong on every input: an extra dimension
    where it answers, a plain None where it raises (so a check that expects the error fails too)."""
    try:
        out = honest(*args, **kwargs)
    except Exception:
        return None
    return out.unsqueeze(0)



def frameless_chain(*steps):
    """A callable of C builtins only (no Python frame runs when torch calls it, with no argument or one): each call
    runs the next of `steps` (`(function, *arguments)`, made beforehand), keeps what it gave in the list returned
    beside it, and returns False (then False for ever)."""
    import functools
    import itertools
    kept = []
    results = itertools.chain(*[itertools.starmap(function, [tuple(arguments)]) for function, *arguments in steps])
    return functools.partial(next, itertools.chain(map(bool, map(kept.append, results)), itertools.repeat(False))), kept
