"""What a torch entry point is: the names it has, whether it is torch's public API, and the ones refused.

Built once per sandbox process (the zygote's warm-up: forked workers share it), from torch itself:

- public: an attribute of torch's public namespaces (``torch``, ``torch.Tensor``,
  ``torch.nn.functional``, ...) whose name has no leading underscore and that torch documents (has a
  docstring, there or under the same name in another public namespace), or that is no operator's
  binding (``Tensor.new``): ``torch.mkldnn_convolution`` and ``torch.constant_pad_nd`` are operators,
  reachable but undocumented, hence private (SECURITY.md lists what is refused as private, and why);
- private: everything else the recorder's mode sees (``torch._C._nn.thnn_conv2d``, an operator under
  ``torch.ops`` that is not public under its own name, a builtin found nowhere);
- implementations: the modules holding torch's Python implementations of operators, taken from its
  decomposition table and its map of torch functions to references (``torch._refs``,
  ``torch._decomp.decompositions``, ...): code there computes an operator in Python, and the mode sees
  only the primitives it calls;
- bridges: the ways a tensor's data goes to another array library (numpy, DLPack) and comes back.

The recorder reports what it sees under these names; ``torchgrade.sandbox.forbidden`` decides.
"""

from __future__ import annotations

import functools
import sys
import warnings
from typing import Any

import torch

from torchgrade.sandbox.forbidden import BRIDGE, PRIVATE
from torchgrade.sandbox.arrays import qualname as code_qualname

#: Torch's public namespaces, by the dotted name a student's source would use.
PUBLIC_NAMESPACES = ("torch", "torch.Tensor", "torch.nn.functional", "torch.nn", "torch.nn.init", "torch.linalg",
                     "torch.fft", "torch.special", "torch.autograd", "torch.autograd.functional", "torch.func",
                     "torch.optim", "torch.sparse", "torch.nested", "torch.distributed", "torch.nn.utils",
                     "torch.utils.data", "torch.testing", "torch.random", "torch.cuda", "torch.backends")
#: Namespaces of torch's bindings: names found only here are private.
BINDINGS = ("torch._C._nn", "torch._C._VariableFunctions", "torch._C._linalg", "torch._C._fft", "torch._C._special",
            "torch._C._sparse", "torch._C._nested", "torch._C.TensorBase")
#: Tensor methods and torch functions that hand a tensor's data to another array library, or take it back.
BRIDGES = frozenset({"numpy", "__array__", "__array_wrap__", "__dlpack__", "__dlpack_device__", "from_numpy",
                     "from_dlpack", "frombuffer"})
#: Torch functions that take an array of another library (a numpy array given to them is a bridge).
CONVERTERS = frozenset({"tensor", "as_tensor", "asarray", "new_tensor", "Tensor"})
#: Where the mode's own frames and torch's `__torch_function__` plumbing live (not an entry of the student's).
_PLUMBING = ("torch.overrides", "torch.utils._device", "torch._tensor", "torch.autograd.function")


def _resolve(dotted: str) -> Any:
    module, _, rest = dotted.partition(".")
    obj = sys.modules.get(module)
    for part in rest.split(".") if rest else ():
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _public(name: str, obj: Any, documented: set[str], operators: frozenset[str]) -> bool:
    if name.startswith("__") and name.endswith("__"):
        return True
    # Documented here, or under the same name in another public namespace: which of torch's aliases
    # carry a docstring changes between releases (torch.relu has none in 2.11, F.relu has). An undocumented
    # name is private only where it is an operator's binding (torch.constant_pad_nd, mkldnn_convolution,
    # conv_tbc): what it computes is not said anywhere; a public method such as Tensor.new is public.
    return not name.startswith("_") and (bool(getattr(obj, "__doc__", None)) or name in documented
                                         or name not in operators)


def aten_operators() -> frozenset[str]:
    """The names of aten's operators, without overloads."""
    return frozenset(n.split("::", 1)[1].split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
                     if n.startswith("aten::"))


def _members(namespace: str) -> list[tuple[str, Any]]:
    """The callables of a namespace (not its modules), by name."""
    holder = _resolve(namespace)
    found = []
    for name in dir(holder) if holder is not None else ():
        try:
            with warnings.catch_warnings():  # deprecated names warn when touched
                warnings.simplefilter("ignore")
                obj = getattr(holder, name)
                if not isinstance(obj, type(sys)) and callable(obj):
                    found.append((name, obj))
        except Exception:
            continue
    return found


class Entries:
    """Names of torch's entry points, by the identity of the object (and of its code, for Python ones)."""

    def __init__(self) -> None:
        self.public: dict[int, str] = {}
        self.private: dict[int, str] = {}
        self.codes: dict[int, str] = {}  # a public Python function's code -> its public name
        self.public_names: set[str] = set()
        self.documented = {name for namespace in PUBLIC_NAMESPACES for name, obj in _members(namespace)
                           if not name.startswith("_") and getattr(obj, "__doc__", None)}
        self.operators = aten_operators()
        for namespace in PUBLIC_NAMESPACES:
            self._scan(namespace, public=True)
        for namespace in BINDINGS:
            self._scan(namespace, public=False)
        self.implementations = implementation_modules()
        self.copies = copy_variants()

    def _scan(self, namespace: str, public: bool) -> None:
        for name, obj in _members(namespace):
            dotted = f"{namespace}.{name}"
            if public and _public(name, obj, self.documented, self.operators):
                self.public.setdefault(id(obj), dotted)
                self.public_names.add(name)
                code = getattr(obj, "__code__", None)
                if code is not None:
                    self.codes.setdefault(id(code), dotted)
            else:
                self.private.setdefault(id(obj), dotted)
        # the objects stay alive in their namespaces, so their ids stay theirs

    def names(self, func: Any, args: tuple) -> tuple[str, ...]:
        """What to record for a call of `func` made by the student's code (besides its plain name)."""
        packet = getattr(func, "overloadpacket", None) if isinstance(func, torch._ops.OpOverload) else func
        if isinstance(packet, torch._ops.OpOverloadPacket):
            op = packet.__name__
            overload = f".{func._overloadname}" if packet is not func else ""
            dotted = f"torch.ops.{packet._qualified_op_name.replace('::', '.')}{overload}"
            public = packet._qualified_op_name.startswith("aten::") and op in self.public_names
            found = (dotted,) if public else (dotted, f"{PRIVATE}{dotted}")
            return found + ((f"torch.ops.aten.{self.copies[op]}",) if op in self.copies else ())
        name = getattr(func, "__name__", "")
        if type(func).__name__ == "method-wrapper" or name in ("__get__", "__set__"):
            return ()  # reading or writing an attribute computes nothing
        key = id(func)
        if key in self.public:
            found = [self.public[key]]
            if name in self.copies:  # `view_copy` is `view`, then a copy
                found.append(f"torch.ops.aten.{self.copies[name]}")
            if name in CONVERTERS and any(type(a).__module__.split(".")[0] in ("numpy", "cupy", "jax") for a in args[:1]):
                found.append(f"{BRIDGE}torch.{name}(array)")
            elif name in BRIDGES:
                found.append(f"{BRIDGE}{self.public[key]}")
            return tuple(found)
        if name in BRIDGES:
            return (f"{BRIDGE}torch.Tensor.{name}",)
        dotted = self.private.get(key) or f"{getattr(func, '__module__', None) or '?'}.{getattr(func, '__qualname__', name)}"
        return (dotted, f"{PRIVATE}{dotted}")

    def frame(self, code: Any, module: str) -> tuple[str, ...]:
        """What to record for a frame of torch's Python code run between the student's code and a call."""
        if module.startswith(self.implementations):
            dotted = f"{module}.{code_qualname(code)}"
            return (dotted, f"{PRIVATE}{dotted}")
        public = self.codes.get(id(code))
        if public is not None:
            return (public,)
        if module.startswith(_PLUMBING) or not module.startswith("torch"):
            return ()
        qualname = code_qualname(code).replace(".<locals>", "")
        found = [f"{module}.{qualname}"]
        if "." in qualname:  # a method: its class is a name too (nn.Conv2d's forward)
            found.append(f"{module}.{qualname.rsplit('.', 1)[0]}")
        return tuple(found)


def implementation_modules() -> tuple[str, ...]:
    """The modules of torch's Python implementations of operators, from its own tables."""
    import torch._decomp
    import torch._prims.context

    modules = {getattr(f, "__module__", None) for f in torch._decomp.decomposition_table.values()}
    modules |= {getattr(f, "__module__", None) for f in torch._prims.context.torch_to_refs_map().values()}
    modules = {m for m in modules if m and m.startswith("torch.") and m != "torch._ops.aten" and not m.startswith("torch._ops")}
    modules |= {"torch._prims", "torch._prims_common", "torch._numpy"}  # what the references are written in
    return tuple(sorted(modules))


def copy_variants() -> dict[str, str]:
    """{`view_copy`: `view`, `expand_copy`: `expand`, ...}: the operators torch tags as copying variants of a
    view operator (``torch.Tag.view_copy``), which compute what the view does."""
    found = {}
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, name = qualified.partition("::")
        op, _, overload = name.partition(".")
        if namespace != "aten" or not op.endswith("_copy") or op in found:
            continue
        try:
            if torch.Tag.view_copy in getattr(getattr(torch.ops.aten, op), overload or "default").tags:
                found[op] = op[: -len("_copy")]
        except (AttributeError, RuntimeError):
            continue
    return found


@functools.cache
def entries() -> Entries:
    """The one table of this process (built at warm-up, before any student code)."""
    return Entries()
