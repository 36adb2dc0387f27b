"""What the student's code changed of installed code's state: the globals of installed modules and the attributes
of their classes.

The watch excuses the operators of a call the mode saw as torch's own implementation (torchgrade.sandbox.recorder).
Torch's Python code that runs for such a call reads module globals and class attributes as it goes (`F.relu`
calls `torch.relu`, `Tensor.__len__` reads `self.shape`); a student who sets one of them to a partial over a
forbidden operator, and puts it back afterwards, would have that operator pass for torch's (issue 47,
tests/hostile/installed_state.py). So, before any student code runs (`take`), the dictionaries of every installed
module and of its classes are kept, with where CPython keeps each one's version (PEP 509: it changes with
every change of the dictionary, even one put back). `changes` compares them cheaply (the versions) and, where one
moved, by content: a value that is not installed code's own (plain data, an installed module, function or class)
is a change the student made; and a value set and put back while a request ran is one too.

Not watched: modules imported after `take` (torch imports little lazily once warmed up), the grader's own modules,
classes nested in others. Where CPython has no dictionary versions (3.14; another implementation), only what is
still changed at a look is seen.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import operator
import sys
import types
import weakref
from typing import Any, Callable

from torchgrade.sandbox import provenance

#: PyDictObject: the object's head (2 words), ma_used, then ma_version_tag (CPython 3.6 to 3.13).
_VERSION_AT = 3 * ctypes.sizeof(ctypes.c_void_p)
_HEAP = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (not one of CPython's own, which no code changes)
_GONE = object()
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})
_CONTAINERS = frozenset({tuple, list, set, frozenset, dict})
_flags = type.__dict__["__flags__"].__get__
_attributes = type.__dict__["__dict__"].__get__

#: Modules whose globals change as the sandbox runs (sys: its streams, set for each request).
_NOT_KEPT = frozenset({"__main__", "sys"})
#: What `take` kept: (name, dictionary, its values as last found clean), one of each dictionary.
_kept: list[tuple[str, dict, dict]] = []
#: Reads every one's version at once (None where this Python keeps none); each version when last found clean.
_read: Callable[[], tuple] | None = None
_clean: list[int] = []


def _versions_readable() -> bool:
    """Whether this Python keeps a version in each dictionary where `_VERSION_AT` says (tried on one)."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return False
    probe: dict = {}
    version = ctypes.c_uint64.from_address(id(probe) + _VERSION_AT)
    before = version.value
    probe[0] = 0
    changed = version.value
    del probe[0]
    return 0 != before != changed != version.value


def take() -> None:
    """Keep every installed module's globals and its classes' attributes (before any student code runs)."""
    seen: set[int] = set()
    for name, module in list(sys.modules.items()):
        if module is None or name in _NOT_KEPT or name.split(".")[0] == "torchgrade":
            continue
        try:
            space = vars(module)
        except TypeError:
            continue
        _keep(name, space, seen)
        for value in list(space.values()):
            if issubclass(type(value), type) and _module_of(value) == name and _flags(value) & _HEAP:
                for attributes in gc.get_referents(_attributes(value)):  # (the dictionary behind the proxy)
                    if type(attributes) is dict:
                        _keep(f"{name}.{value.__qualname__}", attributes, seen)
    global _read
    if _versions_readable() and len(_kept) > 1:
        _read = _reader([id(space) + _VERSION_AT for _, space, _ in _kept])
        _clean[:] = _read()


def _reader(addresses: list[int]) -> Callable[[], tuple]:
    """All the 64-bit words at `addresses`, read in one C call: a view of the memory from the lowest to the highest
    (never read elsewhere) and an itemgetter of their places in it, 20 ns a word, against 100 through ctypes
    objects one by one (a look at thousands of dictionaries is made for each call of torch's Python code)."""
    low = min(addresses)
    words = memoryview((ctypes.c_char * (max(addresses) + 8 - low)).from_address(low)).cast("B").cast("Q")
    return functools.partial(operator.itemgetter(*[(address - low) // 8 for address in addresses]), words)


def _keep(name: str, space: dict, seen: set[int]) -> None:
    if id(space) not in seen:
        seen.add(id(space))
        _kept.append((name, space, dict(space)))


def settle() -> None:
    """Take what changed since `take` as installed code's own (in a worker forked from the zygote, before the
    student's module is imported: threading's locks made anew after the fork, the sandbox's own settings)."""
    now = _read() if _read is not None else None
    for i, (_, space, then) in enumerate(_kept):
        if now is None or now[i] != _clean[i]:
            then.clear()
            then.update(space)
    if now is not None:
        _clean[:] = now


def changes(put_back: bool) -> list[str]:
    """What was changed since the last look: each value that is not installed code's own (`name.key`), and, with
    `put_back`, each dictionary changed and put back as it was since the last look. A change that is installed
    code's own (a module imported lazily, a cache of plain data, a warnings registry) is taken as the new state.
    Without dictionary versions only what is still changed is seen, and only with `put_back` (at a request's end:
    comparing every dictionary takes milliseconds)."""
    if _read is None:
        return _compare(range(len(_kept)), None, False) if put_back else []
    now = _read()
    if list(now) == _clean:
        return []
    return _compare([i for i, (a, b) in enumerate(zip(now, _clean)) if a != b], now, put_back)


def _compare(moved: Any, now: list[int] | None, put_back: bool) -> list[str]:
    found = []
    for i in moved:
        name, space, then = _kept[i]
        differ, wrong = [], []
        for key in list(space) + [key for key in then if key not in space]:
            if type(key) is not str:  # (no one else's key is looked up: its __eq__ is not called)
                wrong.append(f"a key of type {type(key).__name__}")
            elif space.get(key, _GONE) is not then.get(key, _GONE):
                differ.append(key)
                if not installed_own(space.get(key, _GONE), depth=3) or _code(then.get(key)):
                    wrong.append(key)
        if wrong:
            found += [f"{name}.{key}" for key in wrong]
            continue  # (still wrong at the next look, until put back)
        if not differ and put_back:
            found.append(f"{name} (a value set and put back)")
        for key in differ:
            value = space.get(key, _GONE)
            if value is _GONE:
                del then[key]
            else:
                then[key] = value
        if now is not None:
            _clean[i] = now[i]
    return found


def installed_own(value: Any, depth: int = 6, budget: int = 20_000) -> bool:
    """Whether torch's code can do nothing with `value` that runs code no watch sees: plain data, installed modules
    and classes, Python functions (the student's run as the student's: a profile hook sees them), and objects of
    installed classes and containers holding only such values, looked into `depth` levels (`budget` values in
    all; past it, no). Not: anything else called or read through (a partial, a builtin, a bound method, a
    property, a namespace holding one), or an object of a class of the student's."""
    todo, seen = [(value, depth)], set()
    while todo:
        value, depth = todo.pop()
        kind = type(value)
        if kind in _PLAIN or kind is types.FunctionType or id(value) in seen:
            continue
        seen.add(id(value))
        budget -= 1
        if depth <= 0 or budget <= 0:
            return False
        if kind is weakref.ref:  # (calling one gives what it refers to)
            todo.append((value(), depth - 1))
        elif kind in _CONTAINERS:
            todo += [(item, depth - 1) for item in (*value.keys(), *value.values()) if kind is dict] \
                if kind is dict else [(item, depth - 1) for item in value]
        elif issubclass(kind, types.ModuleType):  # (read without calling anything of the value's own)
            name = _module_globals(value).get("__name__")
            if not (type(name) is str and sys.modules.get(name) is value and _installed_module(value)):
                return False
        elif issubclass(kind, type):
            if not _installed_class(value):
                return False
        elif kind is types.MethodType and type(value.__func__) is types.FunctionType:
            todo.append((value.__self__, depth - 1))
        elif not (_installed_class(kind) and _python_or_none(kind, "__call__") and _python_or_none(kind, "__get__")):
            return False
        else:  # (its attributes, without calling anything of its own)
            todo += [(item, depth - 1) for item in gc.get_referents(value) if item is not kind]
    return True


def _python_or_none(kind: type, name: str) -> bool:
    """Whether the class's special method `name` is Python code (which reads the object's attributes) or absent:
    not C (a partial's call, a property's get)."""
    for base in kind.__mro__:
        method = vars(base).get(name)
        if method is not None:
            return type(method) is types.FunctionType
    return True


def _code(value: Any) -> bool:
    """Whether `value` is code (a function, class, module, builtin, callable): another value in its place sends
    torch's code elsewhere (`torch.relu = F.pad`), where plain data would not."""
    return value is not None and (callable(value) or issubclass(type(value), types.ModuleType))


def _installed_class(kind: type) -> bool:
    module = sys.modules.get(_module_of(kind))
    return module is not None and _installed_module(module)


_module_globals = types.ModuleType.__dict__["__dict__"].__get__
_module_of = type.__dict__["__module__"].__get__


def _installed_module(module: types.ModuleType) -> bool:
    space = _module_globals(module)
    path = space.get("__file__")
    if type(path) is not str:
        return space.get("__name__") in sys.builtin_module_names
    return provenance.installed_file(path)
