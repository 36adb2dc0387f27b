"""What the student's code changed of installed code's state, which torch's own Python code reads as it runs.

The watch excuses the operators of a call the mode saw as torch's own implementation (torchgrade.sandbox.recorder).
Torch's Python code that runs for such a call reads module globals, class attributes, `sys.modules` and the
variables its closures captured as it goes (`F.relu` calls `torch.relu`, `Tensor.__len__` reads `self.shape`); a
student who sets one of them to a partial over a forbidden operator, and puts it back afterwards, would have that
operator pass for torch's (issue 47, tests/hostile/installed_state.py). So, before any student code runs (`take`),
the dictionaries of every installed module and of its classes are kept, with where CPython keeps each one's
version (PEP 509: it changes with every change of the dictionary, even one put back), and so are the cells of the
installed functions found there; a module imported later is kept as its import leaves it (`_Keeper`), and an
installed function's code or defaults set at run time is an audited event (provenance). `changes` compares them
cheaply (the versions and cells read in one C call each) and, where one moved, by content: a value that installed
code would not have set is a change the student made; and so is, where asked, a value set and put back.

Not kept: the grader's own modules, `sys`'s attributes, classes nested in others, closures made at run time.
Where CPython has no dictionary versions (3.14; another implementation), every look compares everything by
content (milliseconds), and only what is still changed is seen.
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
_CELL_AT = 2 * ctypes.sizeof(ctypes.c_void_p)
_HEAP = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (not one of CPython's own, which no code changes)
_GONE = object()
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})
_CONTAINERS = frozenset({tuple, list, set, frozenset, dict})
_flags = type.__dict__["__flags__"].__get__
_attributes = type.__dict__["__dict__"].__get__

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
#: Globals the grader itself sets around a request (the audit's line trace: torchgrade.sandbox.linetrace).
_GRADERS = frozenset({("threading", "_trace_hook")})
#: Modules whose globals change as the sandbox runs (sys: its streams, set for each request).
_NOT_KEPT = frozenset({"__main__", "__mp_main__", "sys"})
#: What `take` kept: (name, dictionary, its values as last found clean), one of each dictionary.
_kept: list[tuple[str, dict, dict]] = []
_spaces: set[int] = set()
_functions: set[Any] = set()
_readable = False
#: Reads every one's version at once (None where this Python keeps none); each version when last found clean.
_read: Callable[[], tuple] | None = None
_clean: list[int] = []
#: The variables that installed functions kept in module globals and classes captured (a decorator's wrapped
#: function, a dispatcher's two choices): (function's name, variable's name, cell, its value as last found clean);
#: with a reader of where each cell points (a cell keeps no version: set and put back, it is not seen).
_cells: list[tuple[str, str, Any, Any]] = []
_read_cells: Callable[[], tuple] | None = None
_clean_cells: list[int] = []


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


#: The top-level names of the installed packages kept (`take`): a module under one of them is theirs.
_PACKAGES: set[str] = set()


def take() -> None:
    """Keep every installed module's globals and its classes' attributes, and `sys.modules` itself (torch imports
    inside its functions), before any student code runs; and each installed module imported later, as its import
    leaves it (`_Keeper`, first on `sys.meta_path`)."""
    global _readable
    _readable = _versions_readable()
    if _KEEPER not in sys.meta_path:  # (first: what is imported while this runs is kept too)
        sys.meta_path.insert(0, _KEEPER)
    _keep("sys.modules", sys.modules)
    for name, module in list(sys.modules.items()):
        _keep_module(name, module)
    _read_again()


def _keep_module(name: str, module: Any) -> None:
    if module is None or name in _NOT_KEPT or name.split(".")[0] == "torchgrade":
        return
    try:
        space = vars(module)
    except TypeError:
        return
    _keep(name, space)
    top = name.split(".")[0]
    _PACKAGES.add(top)
    if top != "torch" and top not in _STDLIB:  # (the classes of numpy, sympy and the rest: torch's code keeps to
        return                                 # its own and the standard library's, and a look reads each one)
    torchs = top == "torch"  # (closures: torch's only, 6,000 cells of 10,000, each read at a look)
    for value in list(space.values()):
        kind = type(value)
        if kind is types.FunctionType:
            if torchs and value.__closure__:
                _keep_cells(value)
        elif issubclass(kind, type) and _module_of(value) == name and _flags(value) & _HEAP:
            for attributes in gc.get_referents(_attributes(value)):  # (the dictionary behind the proxy)
                if type(attributes) is dict:
                    _keep(f"{name}.{value.__qualname__}", attributes)
                    if torchs:
                        for member in list(attributes.values()):
                            function = getattr(member, "__func__", member)  # (a static or class method's too)
                            if type(function) is types.FunctionType and function.__closure__:
                                _keep_cells(function)


def _keep_cells(function: types.FunctionType) -> None:
    if function not in _functions and provenance.installed(function.__code__):
        _functions.add(function)
        name = f"{function.__globals__.get('__name__')}.{function.__code__.co_name}"  # (not a wrapped one's name)
        for variable, cell in zip(function.__code__.co_freevars, function.__closure__):
            _cells.append((name, variable, cell, _contents(cell)))


def _contents(cell: Any) -> Any:
    """What a cell holds (`_GONE`: not bound yet)."""
    try:
        return cell.cell_contents
    except ValueError:
        return _GONE


def _keep(name: str, space: dict) -> None:
    if id(space) not in _spaces:
        _spaces.add(id(space))
        _kept.append((name, space, dict(space)))


def _read_again() -> None:
    """(Re)make the reader of every kept dictionary's version, each as it is now taken to be clean."""
    global _read, _read_cells
    if _readable and len(_kept) > 1:
        _read = _reader([id(space) + _VERSION_AT for _, space, _ in _kept])
        _clean[:] = _read()
    if _readable and len(_cells) > 1:  # (PyCellObject: the object's head, 2 words, then what it holds)
        _read_cells = _reader([id(cell) + _CELL_AT for _, _, cell, _ in _cells])
        _clean_cells[:] = [id(value) if value is not _GONE else 0 for _, _, _, value in _cells]


def _reader(addresses: list[int]) -> Callable[[], tuple]:
    """All the 64-bit words at `addresses`, read in one C call: a view of the memory from the lowest to the highest
    (never read elsewhere) and an itemgetter of their places in it, 20 ns a word, against 100 through ctypes
    objects one by one (a look at thousands of dictionaries is made for each call of torch's Python code)."""
    low = min(addresses)
    words = memoryview((ctypes.c_char * (max(addresses) + 8 - low)).from_address(low)).cast("B").cast("Q")
    return functools.partial(operator.itemgetter(*[(address - low) // 8 for address in addresses]), words)


class _Keeper:
    """A finder first on `sys.meta_path` that finds nothing itself: it asks the finders after it, and a module they
    load from an installed file is kept (`_keep_module`) as soon as its code has run, before any other code can
    change it (the modules torch imports lazily, or the student's code does, after the warm-up)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                loader = spec.loader
                if type(spec.origin) is str and provenance.installed_file(spec.origin) \
                        and hasattr(loader, "exec_module") and not isinstance(loader, _Keeping):
                    spec.loader = _Keeping(loader)
                return spec
        return None


class _Keeping:
    """A loader's stand-in: the real loader runs the module, which is then kept."""

    def __init__(self, loader: Any):
        self.loader = loader

    def __getattr__(self, name: str) -> Any:  # (resources, source, the rest: the real loader's)
        return getattr(self.loader, name)

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        # What installed code changes as it is imported is its own (importing torch._dynamo wraps torch.manual_seed):
        # what was changed before is looked at first, and kept for the next look. (Once for an import and all
        # those it makes: torch._dynamo brings hundreds of modules.)
        global _depth
        space = id(_module_globals(module))
        _importing.add(space)  # (in sys.modules already, as the import system puts it there before its code runs)
        if _depth == 0:
            _pending.extend(changes(False))
        _depth += 1
        try:
            self.loader.exec_module(module)
        finally:
            _depth -= 1
            _keep_module(module.__name__, module)
            _importing.discard(space)
            if _depth == 0:
                settle()


_KEEPER = _Keeper()


def settle() -> None:
    """Take what changed since the last look as installed code's own (in a worker forked from the zygote, before
    the student's module is imported: threading's locks made anew after the fork, the sandbox's own settings;
    after an installed module's import)."""
    now = _read() if _read is not None else ()
    for i, (_, space, then) in enumerate(_kept):
        if i >= len(now) or now[i] != _clean[i]:  # (one kept since the reader was made is as it was kept)
            then.clear()
            then.update(space)
    pointers = _read_cells() if _read_cells is not None else ()
    for i, (function, variable, cell, _) in enumerate(_cells):
        if i >= len(pointers) or pointers[i] != _clean_cells[i]:
            _cells[i] = (function, variable, cell, _contents(cell))
    if len(now) == len(_kept) and len(pointers) == len(_cells):
        _clean[:] = now
        _clean_cells[:] = pointers
    else:
        _read_again()


#: What a look made before an import found (`_Keeping`), for the next look to give; the modules being imported.
_pending: list[str] = []
_importing: set[int] = set()
_depth = 0


def changes(put_back: bool) -> list[str]:
    """What was changed since the last look: each value that is not installed code's own (`name.key`), and, with
    `put_back`, each dictionary changed and put back as it was since the last look. A change that is installed
    code's own (a module imported lazily, a cache of plain data, a warnings registry) is taken as the new state.
    Without dictionary versions every dictionary is compared by content, and only what is still changed is seen."""
    found = _retargeted_functions(put_back) if provenance.retargeted or _retargeted else []
    if _pending:
        found[:0] = _pending
        _pending.clear()
    if _read_cells is None or list(_read_cells()) != _clean_cells:
        found += _changed_cells()
    if _read is None:  # (every dictionary by content, some milliseconds: only what is still changed is seen)
        return found + _compare(range(len(_kept)), None, False)
    now = _read()
    if list(now) == _clean:
        return found
    return found + _compare([i for i, (a, b) in enumerate(zip(now, _clean)) if a != b], now, put_back)


def _changed_cells() -> list[str]:
    """Each captured variable of an installed function that holds what installed code would not have put there
    (`function's captured name`); another value that installed code could have is taken as the new state."""
    found = []
    for i, (function, variable, cell, before) in enumerate(_cells):
        value = _contents(cell)
        if value is before:
            continue
        if _redirected(before, value) or not installed_own(value, depth=3):
            found.append(f"{function}'s captured {variable}")
        else:
            _cells[i] = (function, variable, cell, value)
            if _clean_cells:
                _clean_cells[i] = id(value) if value is not _GONE else 0
    return found


#: Installed functions whose code or defaults were set (provenance's audit hook), by (id, attribute): the function,
#: the attribute and its value before.
_retargeted: dict[tuple[int, str], tuple[Any, str, Any]] = {}


def _retargeted_functions(put_back: bool) -> list[str]:
    """Each installed function whose code or defaults are not what they were (`name.__code__`): torch's code calls
    it by the same name and runs what it now holds; with `put_back`, one changed and put back too."""
    while provenance.retargeted:
        function, attribute, before = provenance.retargeted.pop(0)
        _retargeted.setdefault((id(function), attribute), (function, attribute, before))
    found = []
    for key, (function, attribute, before) in list(_retargeted.items()):
        name = f"{getattr(function, '__module__', '?')}.{function.__qualname__}.{attribute}"
        if getattr(function, attribute) is not before:
            found.append(name)
        else:
            del _retargeted[key]
            if put_back:
                found.append(f"{name} (set and put back)")
    return found


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
                if (name, key) not in _GRADERS and _changed_wrongly(space, key, then.get(key)):
                    wrong.append(key)
        if wrong:
            found += [f"{name}.{key}" for key in wrong]
            continue  # (still wrong at the next look, until put back)
        if not differ and put_back and space is not sys.modules:  # (the import system moves each module it imports)
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


def _changed_wrongly(space: dict, key: str, then: Any) -> bool:
    """Whether `space[key]` (`_GONE`: deleted) is not what installed code would have made of `then`: in place of
    code, anything else; a value that is not installed code's own; in `sys.modules`, a module of an installed
    package's name, or one that claims an installed file, that was not imported from it (`_Keeper`)."""
    value = space.get(key, _GONE)
    if _redirected(then, value):
        return True
    if space is sys.modules:
        if value is None or value is _GONE:
            return False
        if not issubclass(type(value), types.ModuleType):
            return True
        kept = id(_module_globals(value)) in _spaces or id(_module_globals(value)) in _importing
        return not kept and (_installed_module(value) or key.split(".")[0] in _PACKAGES)
    return not installed_own(value, depth=3)


def _redirected(before: Any, value: Any) -> bool:
    """Whether `value` in place of `before`, code (a function, class, module, builtin, callable), sends torch's code
    elsewhere unwatched (`torch.relu = F.pad`): anything but a Python function of code not installed, which runs
    as the student's where it is called (a profile hook sees it)."""
    code = before is not None and (callable(before) or issubclass(type(before), types.ModuleType))
    return code and not (type(value) is types.FunctionType and not provenance.installed(value.__code__))


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
