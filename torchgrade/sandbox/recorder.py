"""The call recorder: what torch ran while the student's code ran, seen at two layers.

1. ``CallRecorder``, a ``TorchFunctionMode``: every torch function and Tensor method the student's
   code calls, by its Python name, with the student's line. Python can switch it off
   (``torch._C.DisableTorchFunction``, ``_disable_current_modes``) or go around it (a thread).
2. ``DispatchWatch``: a RecordFunction observer armed around each request (the compiled one of
   ``torchgrade.sandbox.observer`` where the sandbox loaded it, else a Kineto profiler session whose
   event tree ``Findings`` walks, kept open across requests whose findings the host reads later; both
   compute the same record) sees every operator at the
   dispatcher (RecordFunction), in every thread, whatever Python modes are on; in the probe's
   thread, only during the student's windows (the probe's own work is not looked at). A call the mode
   sees runs with RecordFunction off in its thread: what it runs is its implementation, and
   recording that was most of the watch's cost (the profiler's is per operator). Calls that may
   run autograd's engine (``backward``, ``grad``) are recorded instead, bracketed by a marker, for
   a custom Function's backward run inside them is the student's code. An operator recorded in
   the student's thread outside any marker ran where the mode did not see it, and is recorded by
   its name too (``where`` = ``DISPATCHER``). The autograd engine run inside a backward (a hidden
   ``torch.autograd.grad``, the engine's own ``run_backward``) shows as a node evaluated inside
   another node's evaluation, and is recorded as ``backward``/``grad``.

Everything inside a window is the target's, whoever's frame is on the stack (a target that is torch's own
function, code compiled under another file's name: ``UNLINED``), except what torch's installed code does
while the outermost window drives the code under test (``Target.drive``: a probe's ``backward``,
``gradcheck``). Inside a call the mode saw, code torch calls back that is not installed code (an
``__index__``, a hook, a dispatch mode) runs as in a window (``_callbacks``); what is installed code is
``torchgrade.sandbox.provenance``'s to say.

Switching the layers off is itself recorded (``TAMPERED``): the mode gone from the stack, the
profiler stopped, restarted or paused (its switches are replaced, before any student code runs, by
ones that refuse and record), or markers that the mode did not make.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import ctypes
import functools
import os
import re
import secrets
import sys
import types
import weakref
from typing import Any, Iterator

import torch
from torch.autograd import ProfilerActivity, ProfilerConfig, ProfilerState
from torch.overrides import TorchFunctionMode

# The `where` of a call seen only at the dispatcher; the name a switched-off recorder is reported under.
from torchgrade.sandbox.forbidden import CHANGED, DISPATCHER, PRIVATE, TAMPERED, UNLINED
from torchgrade.sandbox import arrays, installed_state, observer, provenance
from torchgrade.sandbox.entries import CONVERTERS, entries
# torch's own operator namespaces, and the profiler's switches as torch made them (originals.py)
from torchgrade.sandbox.originals import (BUILTIN as _BUILTIN, MULTITHREADING as _MULTITHREADING, REAL as _REAL,
                                          SAVED_TENSOR_HOOKS as _SAVED_TENSOR_HOOKS)

_EVALUATE = "autograd::engine::evaluate_function: "
#: Autograd nodes of torch's own (derivative formulas) end in a number or are torch::autograd's;
#: a custom Function's node is its class name plus "Backward".
_BUILTIN_NODE = re.compile(r"(Backward\d+|^torch::autograd::.*)$")
#: What autograd's engine itself runs in the evaluation of a node of torch's, beside the node's own range (its
#: derivative formula, at the backward scope), and where (`_engine_step`): before the range, `retain_grad`'s clone
#: and addition; right after it, the reduction of the gradients (`validate_outputs`: each sum that reduces a
#: broadcast gradient with the view right after it, the casts to the input's dtype); last, the input buffer's
#: additions. Anything else there, or there out of its place, ran in a hook (a tensor's or the node's, a pre-hook
#: before the range, a post-hook after the reduction), whatever registered it and whatever it is built of: it is
#: the student's. Kept in step with observer.cpp.
_BEFORE_FORMULA = frozenset({"clone", "add"})
_REDUCING = frozenset({"sum", "view", "to", "_to_copy", "copy_"})
_LATE_STEPS = frozenset({"add", "add_"})
#: And inside AccumulateGrad's own range: the gradient detached, cloned, added or copied into `.grad`
#: (a post-accumulate-grad hook runs there too).
_ACCUMULATE_STEPS = frozenset({"detach", "add", "add_", "clone", "copy_", "new_empty_strided", "empty_strided",
                               "empty_like", "_indices", "_values", "coalesce", "_coalesce", "to", "_to_copy"})
_ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
_BACKWARD_SCOPE = torch._C._profiler.RecordScope.BACKWARD_FUNCTION
#: A named range in the profiler's record, entered and left in C++ (torch.ops' record_function costs ~20 µs
#: a call through Python's op dispatch: a window, and each backward or grad the mode sees, is bracketed).
_Marker = torch._C._profiler._RecordFunctionFast
#: Modules whose frames stand between a call and its caller (torch's dispatch of __torch_function__, torch.ops).
_DISPATCHING = frozenset({"torch.overrides", "torch._ops"})
#: Seen calls that may run autograd's engine, so a student's custom backward: recorded, inside a marker.
_RUNS_BACKWARD = frozenset({"backward", "grad"})
#: The code (by id: hashing a code object reads all of it) of the frames that open a window
#: (torchgrade.sandbox.probes.Target): a call's attribution stops there.
_BOUNDARIES: dict[int, Any] = {}


def boundary(code: Any) -> None:
    """Register the code of a function that runs the code under test inside a window (its frame is the edge)."""
    _BOUNDARIES[id(code)] = code  # (kept: its id stays its own)


class CallRecorder(TorchFunctionMode):
    """Records every torch function and Tensor method the student's code calls, with its first line."""

    def __init__(self, submission: str):
        super().__init__()
        self.submission = submission
        self.calls: dict[str, str] = {}
        #: The marker name around each call (set while a DispatchWatch is armed), and how many it made.
        self.marker: str | None = None
        #: What makes a marker: torch's (Kineto sees it) or the compiled observer's (DispatchWatch).
        self.range: Any = _Marker
        self.marked = 0
        #: torch's Python frames (by the id of their code) already named in `calls`.
        self._named: set[int] = set()
        #: Whether the window open now is the outermost and drives the code under test (Target.drive).
        self.driving = False
        #: Each calling frame's walk up the stack, while the outermost window is open (`_walk`).
        self._walks: dict[Any, tuple] = {}
        #: The entry points already named in `calls` by their dotted names.
        self._named_funcs: set[Any] = set()
        #: How many callbacks of the student's code ran inside calls the mode saw (`_callbacks`).
        self.callbacks = 0

    def reset(self) -> None:
        """Forget what was recorded (each request starts afresh)."""
        self.calls.clear()
        self._named.clear()
        self._named_funcs.clear()
        self._walks.clear()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # Not the array-library hook while the call is recorded and run (its events on the recorder's own
        # builtins were most of its cost): code torch calls back that is not installed code (an __index__, a
        # hook, a dispatch mode) is watched like the target's own (_callbacks).
        previous = sys.getprofile()
        if previous is not None:
            sys.setprofile(None)
        self._charge(func, args, sys._getframe(1))
        if self.marker is not None and _armed is not None and _SAVED_TENSOR_HOOKS(True) is not None:
            # (autograd calls a saved-tensor hook while the operator runs: what it holds now is what will run)
            charge_saved_tensor_hooks(_armed, student_line(sys._getframe(1), self.submission) or UNLINED)
        # Torch may call back into an argument that is not plain data (an `__index__`, `__len__`, `__iter__`
        # of the student's type, a hook) without any Python frame (a callable built of C builtins): no profile
        # hook sees it, so such a call is recorded at the dispatcher whole: what it runs is charged by name.
        plain = self.marker is None or _plain(func, args, kwargs, self)
        _set_profile(_callbacks(self, getattr(getattr(func, "__func__", func), "__code__", None), not plain))
        try:
            if self.marker is None:
                return func(*args, **(kwargs or {}))
            if getattr(func, "__name__", None) not in _RUNS_BACKWARD:
                if not plain:  # recorded whole, at the dispatcher
                    return func(*args, **(kwargs or {}))
                # torch's own work: this thread records none of its operators (through _REAL: guard_switches
                # replaces every module attribute holding a switch, this module's too)
                _REAL["_enable_record_function"](False)
                try:
                    if type(getattr(func, "__func__", func)) is not _PYTHON_FUNCTION:  # (`types` is an argument)
                        return func(*args, **(kwargs or {}))
                    return self._torchs_python(func, args, kwargs, sys._getframe(1))
                finally:
                    _REAL["_enable_record_function"](True)
            self.marked += 1
            _charge_nodes_named_as_torchs(self, sys._getframe(1))
            with self.range(self.marker):  # (recorded: outside a node's own formula every operator is charged)
                return func(*args, **(kwargs or {}))
        finally:
            _set_profile(previous)

    def _torchs_python(self, func: Any, args: tuple, kwargs: dict | None, caller: Any) -> Any:
        """Run a seen call whose work is torch's Python code, unrecorded: what that code reads of installed code's
        state is torch's only as torch left it (installed_state). Before, a value the student's code set there is
        a refused entry; after, so is one set there, or set and put back, while it ran, where anything of the
        student's could run meanwhile (a callback of theirs, another thread). (A call of torch's C++ alone runs
        no Python code to read it; autograd's `backward` is recorded whole.)"""
        self._charge_changes(installed_state.changes(False), caller)
        callbacks = self.callbacks
        try:
            return func(*args, **(kwargs or {}))
        finally:
            if self.callbacks != callbacks or len(sys._current_frames()) > 1:
                self._charge_changes(installed_state.changes(True), caller)

    def _charge_changes(self, changes: list[str], caller: Any) -> None:
        """A refused entry for each change of installed code's state that is not its own (installed_state)."""
        if changes:
            where = student_line(caller, self.submission) or UNLINED
            for what in changes:
                self.calls.setdefault(CHANGED + what, where)

    def _charge(self, func: Any, args: tuple, caller: Any) -> None:
        """Record a call seen in a window: everything there is the target's, whoever's frame is on the stack,
        except what torch's own code does while the outermost window drives the target (Target.drive)."""
        name = getattr(func, "__name__", None) or repr(func)
        if name in ("__get__", "__set__"):  # a property: name it by the attribute
            name = getattr(getattr(func, "__self__", None), "__name__", name)
        if not caller.f_code.co_filename.startswith(self.submission):  # (the usual case needs no more)
            own = getattr(getattr(func, "__func__", func), "__code__", None)
            while caller is not None and (caller.f_code is own or caller.f_globals.get("__name__") in _DISPATCHING):
                caller = caller.f_back  # torch's __torch_function__ plumbing, or the function's own frame
        # Up from the caller: the innermost frame of the submission's files, or the window's boundary (once per
        # calling frame and window: gradcheck's internals make thousands of calls from a few deep frames).
        # (keyed by the frame itself: a frame hashes by identity, and id() is an audited event)
        walk = self._walks.get(caller)
        if walk is None:
            walk = self._walks[caller] = self._walk(caller)
        student, reached, tainted, between = walk
        if student is None and reached and self.driving and not tainted:
            return  # torch driving the code under test, for the probe (a backward, a gradcheck)
        try:
            named = func in self._named_funcs
        except TypeError:  # (an unhashable entry point is named each time)
            named = False
        if named and not between and name in self.calls and name not in CONVERTERS:
            return  # (the usual repeat: nothing new to name)
        where = f"{os.path.basename(student.f_code.co_filename)}:{student.f_lineno}" if student is not None \
            else UNLINED
        self.calls.setdefault(name, where)
        # What the call is, besides its plain name (torchgrade.sandbox.entries): its dotted names, and
        # whether it is private, a bridge to numpy, or run from torch's Python code on the target's behalf.
        if not between:
            if not named or name in CONVERTERS:
                with contextlib.suppress(TypeError):
                    self._named_funcs.add(func)
                for entry in entries().names(func, args):
                    self.calls.setdefault(entry, where)
            return
        table = entries()
        for torch_frame in between:
            code = torch_frame.f_code
            if id(code) not in self._named:
                self._named.add(id(code))
                for entry in table.frame(code, torch_frame.f_globals.get("__name__") or ""):
                    self.calls.setdefault(entry, where)

    def _walk(self, caller: Any) -> tuple:
        """(the submission's innermost frame or None, whether the window's edge was reached, whether
        code that is not installed code stands between, the installed frames between the call and that)."""
        known, submission = provenance.known(), self.submission
        frame, tainted, between = caller, False, []
        while frame is not None:
            code = frame.f_code
            if id(code) in _BOUNDARIES:
                return None, True, tainted, between
            if code.co_filename.startswith(submission):
                return frame, False, tainted, between
            entry = known.get(id(code))
            if not (entry[1] if entry is not None and entry[0] is code else provenance.installed(code)):
                tainted = True
            elif not tainted:
                between.append(frame)  # installed code between the call and whatever made it
            frame = frame.f_back
        return None, False, tainted, between


provenance.EDGES[id(CallRecorder.__torch_function__.__code__)] = CallRecorder.__torch_function__.__code__


provenance.NODE_CLASSES = (torch._C._FunctionBase,)
_type_name = type.__dict__["__name__"].__get__  # (the name autograd records: no metaclass's property stands in)


def _charge_nodes_named_as_torchs(mode: CallRecorder, caller: Any) -> None:
    """Before autograd's engine runs (a seen `backward` or `grad`): a refused entry for each custom Function's
    node class named as one of torch's own nodes (the watch tells torch's derivative formulas by that name; a
    class of another target's left alive is found too), for each such class renamed in this request
    (provenance's audit hook; a rename while the engine runs is charged when the request ends), and for
    autograd's registry of node hooks replaced."""
    found, todo, seen = _node_changes(), [torch._C._FunctionBase], set()
    while todo:
        for kind in type.__subclasses__(todo.pop()):
            if kind not in seen:
                seen.add(kind)
                todo.append(kind)
                name = _type_name(kind)
                if _BUILTIN_NODE.search(name):
                    found.append(f"a custom Function's node named as one of torch's ({name})")
    if found:
        where = student_line(caller, mode.submission) or UNLINED
        for what in found:
            mode.calls.setdefault(PRIVATE + what, where)


#: Arguments torch cannot call back into without the student's Python code running (so a frame the profile
#: hook sees): plain values, exact tensors, torch's own value types. Containers are looked into.
_PLAIN = frozenset({int, float, bool, complex, str, bytes, type(None), type(Ellipsis), torch.Tensor,
                    torch.nn.Parameter, torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size,
                    torch.Generator, torch.qscheme, range, types.FunctionType})
_CONTAINERS = frozenset({tuple, list, dict, slice, types.MethodType, functools.partial})
_LOOKED_INTO = _PLAIN | _CONTAINERS
#: How deep, and how many values, the look into an argument goes; past it, the call is recorded whole.
_PLAIN_DEPTH, _PLAIN_VALUES = 6, 100_000


def _plain(func: Any, args: tuple, kwargs: dict | None, mode: CallRecorder) -> bool:
    """Whether torch, running `func` on these arguments, can call back only into Python code (a frame the
    profile hook sees): every argument plain data, a Python function, or a container of those. A callable
    that runs no Python code (a C builtin, `functools.partial` over one, an object of a type whose `__call__`
    is one) given to torch is also recorded as a refused entry: torch may keep it and run it later (a hook)."""
    owner = getattr(func, "__self__", None)  # a classmethod of the student's class (a Function's `apply`)
    if isinstance(owner, type) and not (owner.__module__ or "").startswith("torch"):
        return False
    budget = [_PLAIN_VALUES]
    if _values_plain(args, 0, budget) and (not kwargs or _values_plain(kwargs.values(), 0, budget)):
        return True
    for value in (*args, *(kwargs or {}).values()):
        if callable(value) and not isinstance(value, type) and not _python_callable(value):
            name = getattr(func, "__name__", None) or "a torch function"
            where = student_line(sys._getframe(2), mode.submission) or UNLINED
            mode.calls.setdefault(f"{PRIVATE}a callback that runs no Python code ({type(value).__name__}), "
                                  f"given to {name}", where)
    return False


def _values_plain(values: Any, depth: int, budget: list[int]) -> bool:
    kinds = set(map(type, values))
    if kinds <= _PLAIN:
        return True
    if depth >= _PLAIN_DEPTH or not kinds <= _LOOKED_INTO:
        return False
    for value in values:
        kind = type(value)
        budget[0] -= 1
        if kind in _PLAIN:
            continue
        if budget[0] < 0:
            return False
        if kind is dict:
            inner: Any = (*value.keys(), *value.values())
        elif kind is slice:
            inner = (value.start, value.stop, value.step)
        elif kind is types.MethodType:
            inner = (value.__func__,)
        elif kind is functools.partial:
            inner = (value.func, *value.args, *value.keywords.values())
        else:
            inner = value
        if not _values_plain(inner, depth + 1, budget):
            return False
    return True


def _python_callable(value: Any) -> bool:
    """Whether calling `value` runs Python code first (a frame the profile hook sees)."""
    return _first_function(value) is not None


def _first_function(value: Any) -> types.FunctionType | None:
    """The Python function that calling `value` runs first, through bound methods, partials and `__call__`
    (None: what runs first is not Python code, a C builtin)."""
    for _ in range(_PLAIN_DEPTH):
        if type(value) is types.FunctionType:
            return value
        if type(value) is types.MethodType:
            value = value.__func__
        elif type(value) is functools.partial:
            value = value.func
        else:
            value = type(value).__dict__.get("__call__")
            if value is None:
                return None
    return None


def _callbacks(mode: CallRecorder, own: Any = None, recording: bool = False) -> Any:
    """The profile hook inside a call the mode saw: the first frame of code that is not installed (a callback
    of the student's that torch runs: an ``__index__``, a hook, a dispatch mode) runs as in a window, with the
    mode on torch's stack and the dispatcher recorded, until it returns.

    With `recording`, the seen call is recorded at the dispatcher whole (its arguments are not plain data):
    `RecordFunction` stays on when a callback returns.

    The seen function's own frame (`own`), where its code does not count as installed (code was compiled
    under its file's name), runs with the dispatcher recorded but without the mode: with the mode, the
    function would dispatch to it again at once, and again, until the recursion limit, leaving the worker
    with a stack of modes that made every later request hang.

    A plain function, and installed files known by name (`provenance.files`): it runs for every Python call
    and builtin call inside the seen call (hundreds for one operator on the CUDA stand-in), so each of those
    costs one call and a comparison or a dictionary lookup."""
    state: list[Any] = [None]  # the student's frame being run, if any (the compiled filter reads it too)
    depth = 0
    files = provenance.files()

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal depth
        try:
            if state[0] is None:
                if event == "call" and not files.get(frame.f_code.co_filename) \
                        and not provenance.installed(frame.f_code):
                    state[0] = frame
                    mode.callbacks += 1
                    if frame.f_code is not own:
                        torch._C._push_on_torch_function_stack(mode)
                    depth = torch._C._len_torch_function_stack()
                    if mode.marker is not None:
                        _REAL["_enable_record_function"](True)
                return
            if event == "return" and frame is state[0]:
                state[0] = None
                if mode.marker is not None and not recording:
                    _REAL["_enable_record_function"](False)
                if frame.f_code is own:
                    if torch._C._len_torch_function_stack() != depth and _armed is not None:
                        _armed.tampered.append("replaced torch's function modes")
                elif torch._C._len_torch_function_stack() == depth and \
                        torch._C._get_function_stack_at(depth - 1) is mode:
                    torch._C._pop_torch_function_stack()
                elif _armed is not None:
                    _armed.tampered.append("replaced torch's function modes")
                return
            arrays.profile(frame, event, arg)  # the array-library watch, as in a window
        except Exception:  # (a profile function that raises is removed: the window's audit says so)
            pass

    hook.state = state  # type: ignore[attr-defined]
    return hook


_HOOK_CODE = _callbacks(None).__code__  # (the code of every hook `_callbacks` makes)


def joined(calls: dict[str, str], findings: dict[str, str]) -> dict[str, str]:
    """A request's calls with what the dispatcher watch found of it afterwards: names the mode did not
    record join at the end; a finding of tampering replaces the request's own (it includes it)."""
    together = {**calls, **{k: v for k, v in findings.items() if k not in calls}}
    if TAMPERED in findings:
        together[TAMPERED] = findings[TAMPERED]
    return together


def _set_profile(hook: Any) -> None:
    """Make `hook` this thread's profile hook. A `_callbacks` hook goes through the compiled observer's filter
    where the sandbox loaded one (observer.cpp: the events it answers never reach Python); so does the
    triple ``sys.getprofile()`` gives while a filtered hook is on (a seen call inside a student's callback
    puts it back). Anything else (None, the array-library hook) is set as it is."""
    compiled = observer.functions.get("profile")
    if compiled is not None:
        if type(hook) is tuple and len(hook) == 3:
            with contextlib.suppress(TypeError, ValueError):  # (a triple of someone else's: set as it is)
                compiled(*hook)
                return
        elif getattr(hook, "__code__", None) is _HOOK_CODE:
            compiled(provenance.files(), hook, hook.state)
            return
    sys.setprofile(hook)


def student_line(frame: Any, submission: str) -> str:
    """`file:line` of the innermost frame of the student's files from `frame` up ("" when none)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(submission):
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


class _Guard:
    """Stands in for one of the watch's switches (the profiler's, the compiled observer's): refuses, and
    says so, while a request is watched."""

    def __init__(self, name: str, real: Any = None, owner: str = "torch.autograd"):
        self.name = name
        self.__name__ = name
        self.real = real if real is not None else _REAL[name]
        self.owner = owner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _armed is not None or _kept is not None:
            what = f"called {self.owner}.{self.name}"
            if _armed is not None:
                _armed.tampered.append(what)
            else:  # between requests (a thread of the student's): the request that ran last is charged
                _kept.charge_last(what)
            raise RuntimeError(f"{self.owner}.{self.name} is the grader's while a check runs")
        return self.real(*args, **kwargs)


_PYTHON_FUNCTION = types.FunctionType
_armed: DispatchWatch | None = None
#: The watch whose profiler session is kept open between requests (`DispatchWatch.armed` with a token).
_kept: DispatchWatch | None = None


def guard_switches() -> None:
    """Replace the profiler's switches wherever a module holds them (before any student code runs)."""
    originals = {id(f): name for name, f in _REAL.items()}
    for module in list(sys.modules.values()):
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            name = originals.get(id(value))
            if name is not None and value is _REAL[name]:
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(module, attr, _Guard(name))
    if observer.module is not None:  # the compiled observer's own switches (the grader keeps the real ones)
        for name, real in observer.functions.items():
            setattr(observer.module, name, _Guard(name, real, "the grader's observer"))
    for name in ("_push_saved_tensors_default_hooks", "_pop_saved_tensors_default_hooks"):
        if not isinstance(getattr(torch._C._autograd, name), _SavedTensorHooks):
            setattr(torch._C._autograd, name, _SavedTensorHooks(getattr(torch._C._autograd, name)))
    global _registry_set
    function = torch.autograd.Function  # (autograd's C++ looks its registry of node hooks up here)
    if function.__dict__.get("_register_hook") is not _REGISTER_NODE_HOOK:
        type.__setattr__(function, "_register_hook", _REGISTER_NODE_HOOK)
        _registry_set = True
        # Neither the class nor its metaclass (whose data descriptor would win) can then be changed or replaced:
        # a registry set and taken away between two looks would not be seen (a class's attribute is not audited).
        for kind in (function, type(function)):
            _make_immutable(kind)


#: Where CPython keeps a type's flags (PyTypeObject: the object's head, 3 words, then 18 slots), and the flag that
#: makes a type's attributes read-only (Py_TPFLAGS_IMMUTABLETYPE, which Python code cannot set).
_TP_FLAGS_AT = 21 * ctypes.sizeof(ctypes.c_void_p)
_IMMUTABLE = 1 << 8


def _make_immutable(kind: type) -> bool:
    """Make a class's attributes and `__class__` read-only, as CPython's own built-in types are (a build whose type
    layout differs keeps it as it is: `_node_changes` still sees a registry left replaced)."""
    flags = ctypes.c_ulong.from_address(id(kind) + _TP_FLAGS_AT)
    if sys.implementation.name != "cpython" or flags.value != kind.__flags__:
        return False
    flags.value |= _IMMUTABLE
    return True


def _register_node_hook(hooks: Any, hook: Any) -> tuple[Any, Any]:
    """Stands in for `torch.autograd.Function._register_hook`, where autograd's C++ keeps the hooks of every node
    (`grad_fn.register_hook`, `register_prehook`): autograd runs them inside the node's evaluation, where a hook's
    operators can pass for the engine's own steps (a post-hook's sum and view for the reduction of a gradient). A
    hook that is not the student's own Python code (C builtins, a function of torch's, a partial over either) is
    kept behind a wrapper that makes it a refused entry of the request it runs in; torch's own closures given as
    they are stay (a module's full backward hook is one). The handle given back does not hand out the dictionary
    autograd keeps (a hook put straight into it would be unchecked)."""
    if hooks is None:
        hooks = collections.OrderedDict()
    if not _watched_callback(hook):
        hook = _refused_node_hook(hook, student_line(sys._getframe(1), provenance.submission()) or UNLINED)
    handle = _NodeHookHandle(hooks)
    hooks[handle.id] = hook
    return hooks, handle


_REGISTER_NODE_HOOK = staticmethod(_register_node_hook)


#: Whether autograd's registry of node hooks is the grader's (`guard_switches`: in a sandbox process).
_registry_set = False


def _node_changes() -> list[str]:
    """What the student's code changed of autograd's nodes: a custom Function's node class renamed in this request
    (provenance's audit hook), and autograd's registry of node hooks replaced (where `_make_immutable` could not
    make that impossible; replaced and put back between two looks, it would not be seen: setting a class's
    attribute is not an audited event)."""
    found = [f"a custom Function's node class renamed ({name})" for name in provenance.renamed_nodes]
    if _registry_set and getattr(torch.autograd.Function, "_register_hook", None) is not _register_node_hook:
        found.append("replaced autograd's registry of node hooks (torch.autograd.Function._register_hook)")
    return found


#: Each node hook's dictionary by its handle's id (what `_NodeHookHandle.remove` removes it from).
_NODE_HOOKS: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()


def _refused_node_hook(hook: Any, where: str) -> Any:
    """`hook`, made a refused entry (registered at `where`) of each request it runs in."""
    def refused(*args: Any) -> Any:
        if _armed is not None:
            _armed.mode.calls.setdefault(f"{PRIVATE}a hook that is not Python code of the student's "
                                         f"({type(hook).__name__}), given to an autograd node", where)
        return hook(*args)
    return refused


class _NodeHookHandle(torch.utils.hooks.RemovableHandle):
    """A node hook's handle: removes the hook, without a reference to the dictionary it is kept in."""

    def __init__(self, hooks: Any):
        super().__init__(collections.OrderedDict())  # (a reference that is dead at once)
        _NODE_HOOKS[self.id] = hooks

    def remove(self) -> None:
        hooks = _NODE_HOOKS.pop(self.id, None)
        if hooks is not None:
            hooks.pop(self.id, None)


class _SavedTensorHooks:
    """Stands in for the entries of `torch.autograd.graph.saved_tensors_hooks(pack, unpack)` (push, pop). Autograd
    calls `pack` while an operator the mode saw runs (its work unrecorded) and `unpack` inside a backward: a hook
    that runs Python code shows its frame to the profile hook, as a callback does; one that runs none (a C
    builtin, a partial over one) is a refused entry, as a call's argument is (`_plain`). The hooks in force are
    checked after each push or pop in a watched request, and when a request is armed (left from before it)."""

    def __init__(self, real: Any):
        self.real = real

    def __call__(self, *args: Any) -> Any:
        done = self.real(*args)
        if _armed is not None:
            charge_saved_tensor_hooks(_armed, student_line(sys._getframe(1), _armed.mode.submission) or UNLINED)
        return done


def charge_saved_tensor_hooks(watch: DispatchWatch, where: str) -> None:
    """Record a refused entry for each saved-tensor hook in force that runs no Python code, that binds arguments
    of its own to torch's code, or that is a closure of torch's holding what torch's code would not put there
    (each runs unwatched inside an operator's work)."""
    for hook in _SAVED_TENSOR_HOOKS(True) or ():
        if not _python_callable(hook):
            watch.mode.calls.setdefault(f"{PRIVATE}a callback that runs no Python code ({type(hook).__name__}), "
                                        "given to saved_tensors_hooks", where)
        elif not _watched_callback(hook):
            watch.mode.calls.setdefault(f"{PRIVATE}a callback that runs torch's own code with arguments of its own "
                                        f"({type(hook).__name__}), given to saved_tensors_hooks", where)
        elif type(hook) is types.FunctionType and not _as_torch_left_it(hook):
            watch.mode.calls.setdefault(f"{CHANGED}{hook.__qualname__}'s captured variables, given to "
                                        "saved_tensors_hooks", where)


def _as_torch_left_it(closure: types.FunctionType) -> bool:
    """Whether a function's code, defaults and captured variables are what installed code would have put there
    (their values can be set from Python: `__closure__[i].cell_contents`, `__defaults__`, `__code__`)."""
    if not provenance.installed(closure.__code__):
        return False
    values = [closure.__defaults__, closure.__kwdefaults__]
    for cell in closure.__closure__ or ():
        with contextlib.suppress(ValueError):  # (a variable not yet bound)
            values.append(cell.cell_contents)
    return all(map(installed_state.installed_own, values))


def _watched_callback(hook: Any) -> bool:
    """Whether a hook torch keeps runs the student's Python code first, which the profile hook sees and watches
    as a callback, or is one of torch's own closures given as it is (save_on_cpu's, checkpoint's, a module's full
    backward hook). Installed code otherwise (a module's function of torch's, a partial or bound method over one,
    an object whose `__call__` is torch's: `torch.ops.aten.one_hot.default`) runs unwatched where autograd calls
    it, with arguments the student chose; and a hook that runs no Python code first is not watched either."""
    function = _first_function(hook)
    if function is None or not provenance.installed(function.__code__):
        return function is not None
    return function is hook and "<locals>" in hook.__qualname__


class _Refused:
    """Stands in for a direct entry into an operator's kernel, which neither the mode nor the profiler sees
    (`OpOverload.redispatch`, a handle's `redispatch_boxed`, a kernel's `call_boxed`): while a request of a
    target with forbidden calls is watched it refuses, and the student's code that tried is recorded."""

    def __init__(self, owner: Any, attribute: str):
        self.real = getattr(owner, attribute)
        self.name = f"{getattr(owner, '__name__', owner)}.{attribute}"

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, instance: Any, *args: Any, **kwargs: Any) -> Any:
        watch = _armed
        if watch is not None:
            where = student_line(sys._getframe(1), watch.mode.submission) or "torchgrade"
            watch.mode.calls.setdefault(f"{PRIVATE}torch.ops.{_op_name(instance)} through {self.name}", where)
            raise RuntimeError(f"{self.name} enters an operator's kernel unseen: it is not available while a "
                               "target with forbidden calls is checked")
        return self.real(instance, *args, **kwargs)


def _op_name(entry: Any) -> str:
    with contextlib.suppress(Exception):
        if isinstance(entry, torch._ops.OpOverload):
            return f"{entry._name}.{entry._overloadname}".replace("::", ".")
        handle = entry.op_handle() if hasattr(entry, "op_handle") else entry
        return handle.schema().name.replace("::", ".")
    return "?"


def guard_kernel_entries() -> None:
    """Make the direct entries into kernels refuse while watched (before any student code runs)."""
    for owner, attribute in ((torch._ops.OpOverload, "redispatch"), (torch._C._DispatchOperatorHandle, "redispatch_boxed"),
                             (getattr(torch._C, "_SafeKernelFunction", None), "call_boxed")):
        if owner is not None and hasattr(owner, attribute):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(owner, attribute, _Refused(owner, attribute))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Kineto prints a line on fd 2 at each start and stop: into /dev/null, not the student's output."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@functools.cache
def _config() -> ProfilerConfig:
    """Operators only (no shapes, stacks, memory), in every thread; built once."""
    from torch._C._profiler import _ExperimentalConfig

    try:
        every_thread = _ExperimentalConfig(profile_all_threads=True)
    except TypeError:  # a torch whose profiler sees only its own thread: a student's thread would go unseen
        raise RuntimeError("this torch's profiler cannot watch every thread (its _ExperimentalConfig has no "
                           "profile_all_threads)") from None
    return ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, every_thread)


class _Range:
    """A named range of the compiled observer's (torch's _RecordFunctionFast records only under a profiler)."""

    __slots__ = ("name", "token")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        self.token = observer.functions["enter"](self.name)

    def __exit__(self, *exc: Any) -> None:
        observer.functions["leave"](self.token)


class DispatchWatch:
    """The watch armed around one request (the compiled observer where the sandbox loaded one, else a
    Kineto profiler session); afterwards, what ran unseen by the mode joins its record.

    A Kineto session costs ~0.35 ms to start and stop and its record costs per event while open: asked with
    a token (`armed`), the watch keeps one session open across requests and leaves that request's findings
    for later (`findings`, when the host asks: a module's requests have ended). Requests are told apart in
    the session's record by markers with a nonce of each request's (the student's code cannot make markers
    the recorder did not: their count is checked), and other threads' events by when they started."""

    def __init__(self, mode: CallRecorder):
        self.mode = mode
        #: The compiled observer's functions, else None: the profiler watches (torchgrade.sandbox.observer).
        self.compiled = observer.functions if observer.module is not None else None
        self.range = _Range if self.compiled is not None else _Marker
        self.nonce = secrets.token_hex(8)
        self.tampered: list[str] = []
        self.windows = 0
        #: How many events the last request's profile held (the watch's cost is per event).
        self.events = 0
        self.pid = os.getpid()
        self._depth = 0  # windows open in this thread while armed
        self._open = 0  # windows open in this thread
        #: The requests of the session kept open, by the host's token: (nonce, windows, markers made, tampering seen).
        self.deferred: dict[str, tuple[str, int, int, list[str]]] = {}
        #: Findings of a closed session's requests not yet asked for (token → calls).
        self.collected: dict[str, dict[str, str]] = {}

    @contextlib.contextmanager
    def armed(self, token: str | None = None) -> Iterator[None]:
        """Profile everything the request runs (the probe's own code included: only windows count). With
        `token`, the profiler's session stays open afterwards and what it saw waits for `findings`.

        Autograd runs every graph of the request in the thread that asks for it, never in device threads of its
        own (as it does for CUDA tensors otherwise): an evaluation at the top of any other thread is then one a
        thread of the student's asked for, on every device, and is charged (`Findings`, observer.cpp)."""
        global _armed, _kept
        multithreading, set_multithreading = _MULTITHREADING
        threaded = multithreading()
        set_multithreading(False)
        self.tampered = []
        self.windows = 0
        self.nonce = secrets.token_hex(8)
        keep = token is not None and self.compiled is None
        if self.compiled is not None:  # (it tells the arming thread by its id)
            self.compiled["arm"](f"torchgrade::watch::{self.nonce}", f"torchgrade::seen::{self.nonce}", _BUILTIN)
        else:
            if not keep:
                self.settle()
            if _kept is not self:
                with _quiet_stderr():
                    _REAL["_prepare_profiler"](_config(), {ProfilerActivity.CPU})
                    _REAL["_enable_profiler"](_config(), {ProfilerActivity.CPU})
                _kept = self if keep else None
            _REAL["_enable_record_function"](True)  # (off in this thread between the kept session's requests)
            with _Marker(f"torchgrade::armed::{self.nonce}"):  # names this thread and the request's start
                pass
        # In this thread only the student's windows count: the probe's own operators around them are
        # not recorded at all (the profiler's cost is per event). Other threads are recorded whole.
        _REAL["_enable_record_function"](False)
        _armed = self
        arrays.arm(self, self.mode.submission)
        self.mode.marker = f"torchgrade::seen::{self.nonce}"
        self.mode.range = self.range
        self.mode.marked = 0
        charge_saved_tensor_hooks(self, UNLINED)  # (pushed before this request)
        provenance.renamed_nodes.clear()  # (a class renamed before: named as torch's, it is found where an engine runs)
        try:
            yield
        finally:
            set_multithreading(threaded)
            arrays.disarm()
            _armed = None
            # (a rename while autograd's engine ran, after the look before it; the registry of node hooks replaced)
            for what in _node_changes():
                self.mode.calls.setdefault(PRIVATE + what, UNLINED)
            self.mode.marker = None
            if os.getpid() != self.pid:  # a child forked by the probe leaves the profiler to its parent
                pass
            elif self.compiled is not None:
                self._collect()
            else:  # a session of this request's own is read now; a kept one, when the host asks
                key = token if keep else ""
                self.deferred[key] = (self.nonce, self.windows, self.mode.marked, self.tampered)
                if keep:  # (this thread records nothing until the next request)
                    if self.tampered:
                        self.mode.calls[TAMPERED] = "; ".join(dict.fromkeys(self.tampered))
                else:
                    self._close_session()
                    self.mode.calls.update(joined(self.mode.calls, self.collected.pop(key)))

    def charge_last(self, what: str) -> None:
        """Tampering seen between requests of the kept session: the request that ran last is charged."""
        if self.deferred:
            self.deferred[next(reversed(self.deferred))][3].append(what)

    def findings(self) -> dict[str, dict[str, str]]:
        """What the requests armed with a token ran unseen by the mode (token → calls, to be `joined` to
        theirs); the kept session is closed (the next such request opens another)."""
        self.settle()
        found, self.collected = self.collected, {}
        return found

    def settle(self) -> None:
        """Close the kept session, if any (its findings kept for `findings`): before a request without the
        watch, or with a session of its own."""
        if _kept is self:
            self._close_session()

    @contextlib.contextmanager
    def window(self, drive: bool = False) -> Iterator[None]:
        """One run of the code under test: a marker, the mode on top, and an audit of both afterwards.
        With `drive`, the probe runs a torch function that runs that code (Target.drive): what torch's own
        code does there is the probe's, in the outermost window only."""
        outer = self.mode.driving
        self.mode.driving = drive and self._open == 0
        self._open += 1
        try:
            if _armed is not self:
                with self.mode:
                    yield
                return
            yield from self._armed_window()
        finally:
            self._open -= 1
            self.mode.driving = outer
            if not self._open:
                self.mode._walks.clear()  # (the frames it holds)

    def _armed_window(self) -> Iterator[None]:
        depth = torch._C._len_torch_function_stack()
        self._depth += 1
        if self._depth == 1:
            _REAL["_enable_record_function"](True)
            sys.setprofile(arrays.profile)  # calls into numpy's code (torchgrade.sandbox.arrays)
        try:
            with self.range(f"torchgrade::watch::{self.nonce}"), self.mode:
                try:
                    yield
                finally:
                    if self.compiled is None and self._depth == 1:  # (the observer counts a window at its end)
                        with _Marker(f"torchgrade::alive::{self.nonce}"):  # the profiler's callbacks still there
                            pass
                    self._audit(depth)
        finally:
            # What the student's code left on torch's stack of modes (said above, a forbidden call) is removed:
            # left there, every later request of this worker would run through it (a stack of the recorder's
            # own modes, left by code compiled under torch's file names, made each request hang)
            while torch._C._len_torch_function_stack() > depth:
                torch._C._pop_torch_function_stack()
            self.windows += 1
            self._depth -= 1
            if self._depth == 0:
                if sys.getprofile() is not arrays.profile:
                    self.tampered.append("replaced the grader's profile hook")
                sys.setprofile(None)
                _REAL["_enable_record_function"](False)

    @property
    def depth(self) -> int:
        """How many windows are open in the probe's thread (0: the probe's own code runs)."""
        return self._depth

    def _audit(self, depth: int) -> None:
        """After the student's code: the mode is where it was put, and torch functions are on."""
        if torch._C._len_torch_function_stack() != depth + 1 or torch._C._get_function_stack_at(depth) is not self.mode:
            self.tampered.append("replaced torch's function modes")
        if not torch._C._is_torch_function_enabled():
            self.tampered.append("left torch functions switched off")

    def _collect(self) -> None:
        """The compiled observer's record of the request."""
        seen = Findings(f"torchgrade::seen::{self.nonce}", f"torchgrade::watch::{self.nonce}")
        names, windows, seen.markers, seen.events, armed = self.compiled["collect"]()
        seen.names, seen.windows = list(names), [None] * windows
        if not armed:
            self.tampered.append("switched the grader's observer off")
        self.events = seen.events
        self._record(seen, self.windows, self.mode.marked, self.tampered, self.mode.calls)

    def _record(self, seen: Findings, windows: int, marked: int, tampered: list[str], calls: dict[str, str]) -> None:
        """One request's findings into its calls: what ran unseen, and how the watch was switched off."""
        if self.compiled is None and seen.alive != len(seen.windows):
            tampered.append("cleared the profiler's callbacks")
        if len(seen.windows) != windows:
            tampered.append("restarted or paused the profiler" if self.compiled is None else
                            "switched the grader's observer off or cleared its callbacks")
        if seen.markers != marked:
            tampered.append("made markers of the recorder's own")
        for name in seen.names:
            calls.setdefault(name, DISPATCHER)
        if tampered:
            calls[TAMPERED] = "; ".join(dict.fromkeys(tampered))

    def _close_session(self) -> None:
        """Stop the profiler's session and split its record by request into `collected`: in this thread by
        each request's markers, in the others by time (an event belongs to the last request started before
        it, or to the first)."""
        global _kept
        _kept = None
        pending, self.deferred = self.deferred, {}
        broken: list[str] = []
        try:
            with _quiet_stderr():
                roots = _REAL["_disable_profiler"]().experimental_event_tree()
        except Exception as e:  # the profiler broken from inside
            broken.append(f"broke the profiler ({type(e).__name__})")
            roots = []
        _REAL["_enable_record_function"](True)
        token_of = {nonce: token for token, (nonce, *_) in pending.items()}
        seen = {token: Findings(f"torchgrade::seen::{nonce}", f"torchgrade::watch::{nonce}")
                for token, (nonce, *_) in pending.items()}
        starts, main = [], None
        for root in roots:
            kind, _, nonce = root.name.rpartition("::")
            if kind == "torchgrade::armed" and nonce in token_of:
                starts.append((root.start_time_ns, token_of[nonce]))
                main = root.start_tid
        starts.sort()
        times = [start for start, _ in starts]
        for root in roots:
            token = token_of.get(root.name.rpartition("::")[2]) if root.start_tid == main else None
            if token is None and starts:
                token = starts[max(bisect.bisect_right(times, root.start_time_ns) - 1, 0)][1]
            elif token is None and pending:  # (no request's start recorded: the profiler was restarted)
                token = next(iter(pending))
            if token is not None:
                seen[token].visit(root, main=root.start_tid == main)
        self.events = sum(found.events for found in seen.values())
        started = {token for _, token in starts}
        for token, (_, windows, marked, tampered) in pending.items():
            problems = tampered + broken + ([] if token in started else ["restarted the profiler"])
            calls: dict[str, str] = {}
            self._record(seen[token], windows, marked, problems, calls)
            self.collected[token] = calls


def _engine_step(phase: int, after_sum: bool, op: str | None) -> tuple[bool, int, bool]:
    """Whether `op` (None: not an operator) is one of the engine's own steps in an evaluation that stands at
    `phase` (0 before the node's range, 1 reducing its gradients, 2 after that), and where it stands then."""
    if phase == 0:
        return op in _BEFORE_FORMULA, 0, False
    if phase == 1:
        if op in _REDUCING and (op != "view" or after_sum):
            return True, 1, op == "sum"
        phase = 2
    return op in _LATE_STEPS, 2, False


class Findings:
    """A walk of the profiler's event tree: operators the mode did not see, autograd run inside a backward."""

    def __init__(self, seen_marker: str, window_marker: str):
        self.seen_marker = seen_marker
        self.window_marker = window_marker
        self.names: list[str] = []
        self.windows: list[Any] = []
        self.markers = 0
        self.events = 0
        #: Windows whose closing marker was recorded (RecordFunction's callbacks not cleared inside).
        self.alive = 0
        self.alive_marker = window_marker.replace("::watch::", "::alive::")

    def visit(self, root: Any, main: bool) -> None:
        """A root event: in the main thread only the student's windows count; in any other, everything."""
        if main:
            self._find_windows(root)
        else:
            self._walk(root, seen=False, evaluating=False, main=False)

    def _find_windows(self, event: Any) -> None:
        self.events += 1
        if event.name == self.window_marker:
            self.windows.append(event)
            for child in event.children:
                self._walk(child, seen=False, evaluating=False, main=True)
            return
        if event.name == self.seen_marker:  # a marker outside a window: not the recorder's
            self.markers += 1
        for child in event.children:
            self._find_windows(child)

    def _walk(self, event: Any, seen: bool, evaluating: bool, main: bool) -> None:
        self.events += 1
        name = event.name
        if name == self.seen_marker:
            self.markers += 1
            seen = True
        elif name == self.alive_marker and main:
            self.alive += 1
        elif name.startswith(_EVALUATE):
            # Autograd run inside a backward; or started where the mode did not see it: in the student's thread,
            # or at the top of any other (autograd has no device thread of its own in a request: `armed`), one
            # the student started by threading, _thread, ctypes or C.
            # Such a run is the student's whole: no node evaluated there passes for a derivative formula of torch's
            # (a custom Function's node may be named as one; the names are looked at only before a run the mode
            # saw). In a run the mode saw, torch's own node: its formula and the engine's steps are torch's.
            if evaluating or not seen:
                self._add("backward")
                self._add("grad")
            elif _BUILTIN_NODE.search(name[len(_EVALUATE):]):
                self._steps(event, main)
                return
            for child in event.children:  # (a custom Function's backward is the student's code)
                self._walk(child, False, True, main)
            return
        elif "::" in name and name.split("::", 1)[0] in _BUILTIN:
            if not seen:
                self._add(name.split("::", 1)[1])
            seen = True  # what an operator runs inside is its implementation
        for child in event.children:
            self._walk(child, seen, evaluating, main)

    def _steps(self, event: Any, main: bool, accumulating: bool = False) -> None:
        """The children of the evaluation of torch's own node (or of AccumulateGrad's range): a node's range at the
        backward scope (a scope no range the student opens has) is its derivative formula, torch's business; an
        operator that is one of the engine's own steps where it stands is torch's; anything else ran in a hook,
        and is recorded."""
        phase, after_sum = 0, False
        for child in event.children:
            name = child.name
            if _BUILTIN_NODE.search(name) and getattr(child.extra_fields, "scope", None) == _BACKWARD_SCOPE:
                self.events += 1
                phase, after_sum = 1, False
                if name == _ACCUMULATE_GRAD:
                    self._steps(child, main, accumulating=True)
                else:
                    for inner in child.children:
                        self._walk(inner, True, True, main)
                continue
            space, _, op = name.partition("::")
            op = op if space in _BUILTIN else None
            if accumulating:
                step = op in _ACCUMULATE_STEPS
            else:
                step, phase, after_sum = _engine_step(phase, after_sum, op)
            self._walk(child, step, True, main)

    def _add(self, name: str) -> None:
        if name not in self.names:
            self.names.append(name)
