"""Whose code a frame runs: installed code (torch's, the standard library's, the grader's) or not.

The recorder excuses what torch's own Python code does while it drives the code under test (a
probe's ``gradcheck``), and watches code that torch calls back from inside a call it saw (an
``__index__``, a hook, a dispatch mode). Both need to tell torch's code from code that only claims
to be: a file name is the student's to choose (``compile(src, torch.nn.functional.__file__,
"exec")``). So a code object counts as installed when its file lies under an installed folder *and*
no code was compiled or built at run time under that file's name, except by the import system reading
that very file (an irremovable audit hook, added before any student code runs, keeps the record).
Code that installed code generates and runs itself (``exec`` of a dataclass's ``__init__``) is
installed code, unless a frame of other code stands between (``_executed``).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from typing import Any

#: Files under which code may have been compiled or built at run time by someone else: never "installed".
_foreign: set[str] = set()
#: Code object id -> (the code object, kept alive so its id stays its own; installed or not).
_known: dict[int, tuple[Any, bool]] = {}
#: File name -> True: every code object under that name is installed code (an installed file, nothing foreign
#: under its name). Looked up by name, without id() (an audited event, so a call of `_audit` itself).
_files: dict[str, bool] = {}
_roots: tuple[str, ...] = ()
_submission = "\0"
_hooked = False


def installed(code: Any) -> bool:
    """Whether `code` is an installed file's own code (not the submission's, not made at run time)."""
    if _files.get(code.co_filename):
        return True
    entry = _known.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    verdict = installed_file(code.co_filename)
    _known[id(code)] = (code, verdict)
    return verdict


def installed_file(name: str) -> bool:
    """Whether the file `name` is installed code, all of it (not the submission's, nothing made under its name)."""
    if _files.get(name):
        return True
    if not _roots:
        _set_roots(())
    verdict = (name.startswith(_roots) or name.startswith("<frozen ")) and not name.startswith(_submission) \
        and name not in _foreign
    if verdict:
        _files[name] = True
    return verdict


def submission() -> str:
    """The folder of the code under watch ("\0" before `watch`)."""
    return _submission


def files() -> dict[str, bool]:
    """The file names whose code is all installed code (a caller's first, cheapest test; `installed` decides)."""
    return _files


def known() -> dict[int, tuple[Any, bool]]:
    """The verdicts made so far, by code object id (for a caller that inlines `installed`'s first step)."""
    return _known


def watch(submission: str, roots: list[str]) -> None:
    """Start keeping the record (once per process), for a sandbox that runs the code in `submission`."""
    global _submission, _hooked
    _set_roots(roots)
    _submission = submission
    _known.clear()  # (_set_roots cleared _files)
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True


def _set_roots(roots: Any) -> None:
    """The installed folders: the standard library's, site-packages (torch's), the grader's and its course's probes."""
    global _roots
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    found |= {os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    _roots = tuple(sorted({os.path.join(r, "") for r in (*found, *roots) if r}))
    _files.clear()


#: The code (by id) of the frames where torch's own work begins (the recorder's handler of a call it saw).
EDGES: dict[int, Any] = {}


_EVENTS = frozenset({"exec", "compile", "code.__new__", "object.__setattr__"})
#: The base of the classes whose name autograd records for a node they make (torch._C._FunctionBase: a custom
#: Function's node), set by the recorder; and every such class renamed at run time (the recorder charges it to
#: the request it happened in). (Setting `__name__` is audited; setting an ordinary attribute of a class is not.)
NODE_CLASSES: tuple[type, ...] = ()
renamed_nodes: list[str] = []
#: Each installed function whose code or defaults were set at run time, with the attribute and its value before
#: (an audited event; torchgrade.sandbox.installed_state charges it where torch's code runs for a seen call).
retargeted: list[tuple[Any, str, Any]] = []
_RETARGETING = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


def _audit(event: str, args: tuple) -> None:
    # Called for every audited event of the process (id(), sys._getframe, ...): the common case returns at once.
    if event not in _EVENTS:
        return
    if event == "exec":
        _executed(args[0])
        return
    if event == "object.__setattr__":  # (a class's special attribute set, a function's code or defaults, ...)
        try:
            if args[1] == "__name__" and isinstance(args[0], type) and NODE_CLASSES \
                    and issubclass(args[0], NODE_CLASSES):
                renamed_nodes.append(str(args[2]))
            elif args[1] in _RETARGETING and type(args[0]) is types.FunctionType and installed(args[0].__code__) \
                    and not installed(sys._getframe(1).f_code):  # (not set by installed code: a namedtuple's own)
                retargeted.append((args[0], args[1], getattr(args[0], args[1])))  # (before it is set)
        except Exception:
            pass
        return
    if event != "compile" and event != "code.__new__":
        return
    try:
        filename = args[1]
        if not isinstance(filename, str) or filename.startswith(_submission) or filename in _foreign:
            return
        if event == "compile" and _is_that_file(args[0], filename):
            return  # the import system compiling an installed file that has no cached bytecode
        _foreign.add(filename)
        _files.pop(filename, None)  # (before the code compiled under its name exists)
    except Exception:  # an audit hook that raises would break the event's caller
        pass


def _executed(code: Any) -> None:
    """Code that installed code generates and runs (a dataclass's ``__init__``, a namedtuple, mpmath's
    arithmetic, all named "<string>") is installed code too, where installed code alone is on the stack up
    to where torch's own work began (the recorder's handler) or to the stack's bottom. Code the
    submission's code had generated (``timeit`` given its source) has a frame of its own on the way."""
    try:
        if not hasattr(code, "co_consts") or (name := code.co_filename).startswith(_submission):
            return
        frame = sys._getframe(2)  # (past this function and the hook: the frame that called exec)
        while frame is not None and id(frame.f_code) not in EDGES:
            if not installed(frame.f_code):
                return
            frame = frame.f_back
        todo = [code]
        while todo:
            item = todo.pop()
            _known[id(item)] = (item, True)
            todo += [c for c in item.co_consts if hasattr(c, "co_consts")]
    except Exception:
        pass


def _is_that_file(source: Any, filename: str) -> bool:
    if not isinstance(source, (str, bytes)) or not os.path.isabs(filename):
        return False
    try:
        with open(filename, "rb") as f:
            data = f.read(len(source.encode() if isinstance(source, str) else source) + 1)
    except OSError:
        return False
    return data == (source.encode() if isinstance(source, str) else source)
