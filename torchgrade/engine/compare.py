"""Compare a student's outcome with the reference's: structure, then shape, dtype, device, then values.

Messages are written for a stuck student: they name *what* differs in words (``the strides of the
result``, not ``['stride']``), then what was expected and what came. A ``Mismatch`` also carries a
``kind`` (``shape``, ``values``, ``raised``, ...) and the item ``path``, from which hints are chosen.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import torch

from torchgrade.engine.bounds import clip, names, preview
from torchgrade.engine.i18n import fact, t
from torchgrade.sandbox import standin


class Mismatch(AssertionError):
    """The student's outcome differs from the reference's; the message says where and how."""

    def __init__(self, message: str, kind: str = "value", path: str = ""):
        super().__init__(message)
        #: What differs: shape, dtype, device, values, value, kind, keys, length, raised, not_raised, wrong_exception.
        self.kind = kind
        #: Where, as an item path into the outcome (``['grads'][0]``); "" for the outcome itself.
        self.path = path


_PART = re.compile(r"\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d+)\]")


def path_parts(path: str) -> list[str | int]:
    """The keys and indices of an item path: ``"['grads'][0]"`` -> ``['grads', 0]``."""
    return [ast.literal_eval(m.group(1)) for m in _PART.finditer(path)]


def describe_path(path: str, lang: str | None = None) -> str:
    """An item path in words, then the path itself: ``whether the result shares memory with the input
    ['shares_storage_with_input']``; the outcome itself (or its ``['value']``) is ``the result``."""
    parts = path_parts(path)
    if not parts or parts == ["value"]:
        return fact("value", lang)
    words = fact(parts[0], lang) if isinstance(parts[0], str) else None
    return f"{words or fact('value', lang)} {clip(path, 200)}"  # (a path holds the student's dict keys)


class _Words:
    """``describe_path(path)``, worked out only if a message is written (most comparisons match)."""

    def __init__(self, path: str):
        self.path = path

    def __format__(self, spec: str) -> str:
        return format(describe_path(self.path), spec)


def _kind(value: Any) -> str:
    if isinstance(value, dict) and "__raised__" in value:
        return t("kind_exception", name=clip(value["__raised__"], 80))
    if isinstance(value, torch.Tensor):
        return t("kind_tensor")
    return t("kind_other", name=type(value).__name__) if value is not None else t("kind_none")


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat //= max(size, 1)
    return tuple(reversed(index))


def _fmt(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, index)) + ("," if len(index) == 1 else "") + ")"


def _number(value: torch.Tensor) -> str:
    item = value.item()
    if isinstance(item, bool) or isinstance(item, int):
        return str(item)
    if isinstance(item, float) and item != item:
        return "NaN"
    return f"{item:.6g}"


def _first_line(text: str, limit: int = 200) -> str:
    return clip(text[:limit + 1].splitlines()[0], limit) if text else ""


#: Tensors up to this many elements are shown in full under a value mismatch.
SHOW_ELEMENTS = 16


def compare_tensors(expected: torch.Tensor, actual: torch.Tensor, path: str = "", *, exact: bool = False,
                    rtol: float | None = None, atol: float | None = None) -> None:
    """Raise Mismatch unless `actual` has the expected shape, dtype, device and (close) values."""
    __tracebackhide__ = True
    if actual.shape == expected.shape and actual.dtype == expected.dtype and actual.device == expected.device \
            and torch.equal(standin.plain(actual), standin.plain(expected)):
        return  # the common case, without building a message
    what = describe_path(path)
    if actual.shape != expected.shape:
        raise Mismatch(t("shape", what=what, expected=tuple(expected.shape), actual=tuple(actual.shape)), "shape", path)
    if actual.dtype != expected.dtype:
        raise Mismatch(t("dtype", what=what, expected=expected.dtype, actual=actual.dtype), "dtype", path)
    if actual.device.type != expected.device.type:
        raise Mismatch(t("device", what=what, expected=expected.device.type, actual=actual.device.type), "device", path)
    actual, expected = standin.plain(actual), standin.plain(expected)  # the CUDA stand-in's values are CPU tensors
    if exact or not (expected.is_floating_point() or expected.is_complex()):
        rtol, atol = 0.0, 0.0
    elif (rtol is None) != (atol is None):  # a check may set one: the other keeps the dtype's default
        from torch.testing._comparison import default_tolerances

        default_rtol, default_atol = default_tolerances(expected)
        rtol, atol = (default_rtol if rtol is None else rtol), (default_atol if atol is None else atol)
    try:
        assert_close_plain(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_device=False)
    except AssertionError:
        raise Mismatch(_value_report(expected, actual, what, rtol, atol), "values", path) from None


def assert_close_plain(actual: torch.Tensor, expected: torch.Tensor, **options: Any) -> None:
    """`torch.testing.assert_close` on two plain tensors, without its DTensor step.

    Both sides reach a comparison through `wire.decode` (exact `torch.Tensor`s, never a subclass), so
    the step that unwraps DTensors returns its inputs as they are; but before looking, torch 2.10 and
    later import torch.distributed.tensor at the first call: 0.9 s of this process's CPU (a seventh of
    a whole `torchgrade check`). The switch that gates that step is off during the call (only where
    this torch has it); everything assert_close compares is compared as before."""
    __tracebackhide__ = True
    from torch.testing import _comparison

    if type(actual) is not torch.Tensor or type(expected) is not torch.Tensor \
            or not getattr(_comparison, "_HAS_DTENSOR", False):
        torch.testing.assert_close(actual, expected, **options)
        return
    previous, _comparison._HAS_DTENSOR = _comparison._HAS_DTENSOR, False
    try:
        torch.testing.assert_close(actual, expected, **options)
    finally:
        _comparison._HAS_DTENSOR = previous


def diff_dtype(value: torch.Tensor) -> torch.dtype:
    """The dtype of ``abs()`` of `value` (a complex number's is real)."""
    return torch.float64 if value.is_complex() else value.dtype


def _value_report(expected: torch.Tensor, actual: torch.Tensor, what: str, rtol: float | None,
                  atol: float | None) -> str:
    e = expected.detach().cpu()
    a = actual.detach().cpu()
    if rtol is None or atol is None:
        from torch.testing._comparison import default_tolerances

        rtol, atol = default_tolerances(e)
    shown = (e.clone(), a.clone())
    if e.dtype == torch.bool:
        e, a = e.to(torch.int64), a.to(torch.int64)
    wide = torch.complex128 if e.is_complex() else torch.float64
    e, a = e.to(wide), a.to(wide)
    both_nan = e.isnan() & a.isnan()
    bad = ~(torch.isclose(a, e, rtol=rtol, atol=atol) | both_nan)
    count, total = int(bad.sum()), bad.numel()
    flat = bad.flatten().nonzero()
    first = _index(int(flat[0]), tuple(e.shape)) if len(flat) else ()
    # A NaN on one side only is said as such, never as an error of "inf"; the errors are those of the rest.
    lines = [
        t("values", what=what, count=count, total=total, percent=f"{100.0 * count / max(total, 1):.1f}"),
        t("values_first", index=_fmt(first), expected=_number(shown[0][first]), actual=_number(shown[1][first])),
    ]
    nan_only = a.isnan() ^ e.isnan()
    for side, which in (("values_nan", nan_only & a.isnan()), ("values_not_nan", nan_only & e.isnan())):
        if bool(which.any()):
            lines.append(t(side, count=int(which.sum()),
                           index=_fmt(_index(int(which.flatten().nonzero()[0]), tuple(e.shape)))))
    numbers = bad & ~nan_only
    if (expected.is_floating_point() or expected.is_complex()) and bool(numbers.any()):
        # for exact integers, the first difference says it
        diff = torch.where(numbers, (a - e).abs(), torch.zeros((), dtype=diff_dtype(a)))
        worst = int(diff.flatten().argmax())
        nonzero = numbers & (e.abs() > 0)  # a relative error is only meaningful where the expected value is not 0
        rel = (diff[nonzero] / e.abs()[nonzero]).max().item() if bool(nonzero.any()) else float("nan")
        lines.append(t("values_largest", abs_error=f"{diff.flatten()[worst].item():.3g}",
                       index=_fmt(_index(worst, tuple(e.shape))), rel_error=f"{rel:.3g}"))
    lines.append(t("values_allowed", atol=f"{atol:g}", rtol=f"{rtol:g}") if (rtol or atol) else t("values_exact"))
    if total <= SHOW_ELEMENTS:
        lines.append(t("values_expected", value=shown[0].tolist()))
        lines.append(t("values_actual", value=shown[1].tolist()))
    return "\n".join(lines)


def _scalars(value: Any) -> bool:
    """A list or tuple of plain scalars (a shape, strides): compared and shown as a whole."""
    return isinstance(value, (list, tuple)) and all(
        isinstance(v, (bool, int, float, str, type(None))) for v in value)


def _returned(actual: Any) -> str:
    """What a call that should have raised returned, in words: a probe's facts about the result
    (a dict with its ``value``) are described by that result, never as the probe's own dict."""
    if isinstance(actual, dict):
        return _kind(actual["value"]) if "value" in actual else t("kind_normally")
    return _kind(actual)


def _names(keys: list) -> str:
    """Facts (dict keys) in words where they have words, else as they are (a few, each cut short)."""
    return names(keys, lambda k: (fact(k) or preview(k, 200)) if isinstance(k, str) else preview(k, 200))


def compare(expected: Any, actual: Any, path: str = "", *, exact: bool = False, rtol: float | None = None,
            atol: float | None = None, accept: tuple[str, ...] = (), like: str | None = None) -> None:
    """Raise Mismatch at the first place `actual` differs from `expected`, walking both structures.

    `accept` names further exception types that count as matching a raised reference exception;
    `like` names the PyTorch op that raises there too (a message says "as <like> does" only then).
    """
    __tracebackhide__ = True
    what = _Words(path)
    if isinstance(expected, dict) and "__raised__" in expected:
        if not (isinstance(actual, dict) and "__raised__" in actual):
            key = ("not_raised_at" if path_parts(path) else "not_raised") + ("_like" if like else "")
            raise Mismatch(t(key, what=what, exception=" or ".join((expected["__raised__"], *accept)),
                             kind=_returned(actual), like=like, message=_first_line(expected["message"])),
                           "not_raised", path)
        wanted = (expected["__raised__"], *accept)
        if not set(wanted) & set(actual.get("mro", ())):
            raise Mismatch(t("wrong_exception", expected=" or ".join(wanted), actual=clip(actual["__raised__"], 80),
                             message=_first_line(actual["message"] or "")), "wrong_exception", path)
        return
    if isinstance(actual, dict) and "__raised__" in actual:
        key = "raised_at" if path_parts(path) else "raised"
        raise Mismatch(t(key, what=what, exception=clip(actual["__raised__"], 80), message=clip((actual["message"] or "")[:501], 500)),
                       "raised", path)
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(t("kind", what=what, expected_kind=_kind(expected), expected=f"{tuple(expected.shape)}",
                             actual_kind=_kind(actual), actual=preview(actual, 80)), "kind", path)
        compare_tensors(expected, actual, path, exact=exact, rtol=rtol, atol=atol)
        return
    if type(expected) is not type(actual):
        raise Mismatch(t("kind", what=what, expected_kind=_kind(expected), expected=preview(expected, 80),
                         actual_kind=_kind(actual), actual=preview(actual, 80)), "kind", path)
    if isinstance(expected, dict):
        # The facts both sides report first, in order: the first difference there says more than a
        # list of the facts only one side reports (a probe reports some facts only in some cases).
        for key in expected:
            if key in actual:
                compare(expected[key], actual[key], f"{path}[{key!r}]", exact=exact, rtol=rtol, atol=atol,
                        accept=accept, like=like)
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        for key in missing:  # an exception expected where the call went on: say so, not "a missing key"
            if isinstance(expected[key], dict) and "__raised__" in expected[key]:
                compare(expected[key], actual, path, accept=accept, like=like)
        for key in extra:
            if isinstance(actual[key], dict) and "__raised__" in actual[key]:
                compare(None, actual[key], path)
        if missing or extra:
            raise Mismatch(t("keys_missing" if missing else "keys_extra", what=what, missing=_names(missing),
                             extra=_names(extra)), "keys", path)
        return
    if isinstance(expected, (list, tuple)):
        if len(expected) != len(actual):
            raise Mismatch(t("length", what=what, expected_len=len(expected), expected=preview(expected, 120),
                             actual_len=len(actual), actual=preview(actual, 120)), "length", path)
        if _scalars(expected) and _scalars(actual) and not any(isinstance(v, float) for v in expected):
            if list(expected) != list(actual):  # shapes, strides: the whole sequence reads better
                raise Mismatch(t("value", what=what, expected=preview(expected, 200), actual=preview(actual, 200)),
                               "value", path)
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, f"{path}[{i}]", exact=exact, rtol=rtol, atol=atol, accept=accept, like=like)
        return
    if isinstance(expected, float) and not exact:
        tolerance = (atol if atol is not None else 1e-7) + (rtol if rtol is not None else 1e-6) * abs(expected)
        if not (abs(expected - actual) <= tolerance or (expected != expected and actual != actual)):
            raise Mismatch(t("value", what=what, expected=repr(expected), actual=repr(actual)), "value", path)
        return
    if expected != actual:
        raise Mismatch(t("value", what=what, expected=preview(expected, 200), actual=preview(actual, 200)), "value", path)
