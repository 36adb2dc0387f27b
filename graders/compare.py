"""Compare a student's outcome with the reference's: structure, then shape, dtype, device, then values."""

from __future__ import annotations

from typing import Any

import torch


class Mismatch(AssertionError):
    """The student's outcome differs from the reference's; the message says where and how."""


def _where(path: str) -> str:
    return f" at {path}" if path else ""


def _kind(value: Any) -> str:
    if isinstance(value, dict) and "__raised__" in value:
        return f"an exception ({value['__raised__']})"
    if isinstance(value, torch.Tensor):
        return "a Tensor"
    return f"a {type(value).__name__}" if value is not None else "None"


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat //= max(size, 1)
    return tuple(reversed(index))


def _fmt(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, index)) + ("," if len(index) == 1 else "") + ")"


def compare_tensors(expected: torch.Tensor, actual: torch.Tensor, path: str = "", *, exact: bool = False,
                    rtol: float | None = None, atol: float | None = None) -> None:
    """Raise Mismatch unless `actual` has the expected shape, dtype, device and (close) values."""
    __tracebackhide__ = True
    if actual.shape != expected.shape:
        raise Mismatch(f"shape{_where(path)}: expected {tuple(expected.shape)}, got {tuple(actual.shape)}")
    if actual.dtype != expected.dtype:
        raise Mismatch(f"dtype{_where(path)}: expected {expected.dtype}, got {actual.dtype}")
    if actual.device.type != expected.device.type:
        raise Mismatch(f"device{_where(path)}: expected the result on {expected.device.type}, got it on "
                       f"{actual.device.type} (build new tensors with device=x.device, or use x.new_zeros(...))")
    if exact or not (expected.is_floating_point() or expected.is_complex()):
        rtol, atol = 0.0, 0.0
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_device=False)
    except AssertionError:
        raise Mismatch(_value_report(expected, actual, path, rtol, atol)) from None


def _value_report(expected: torch.Tensor, actual: torch.Tensor, path: str, rtol: float | None,
                  atol: float | None) -> str:
    e = expected.detach().cpu()
    a = actual.detach().cpu()
    if rtol is None or atol is None:
        from torch.testing._comparison import default_tolerances

        rtol, atol = default_tolerances(e)
    if e.dtype == torch.bool:
        e, a = e.to(torch.int64), a.to(torch.int64)
    wide = torch.complex128 if e.is_complex() else torch.float64
    e, a = e.to(wide), a.to(wide)
    both_nan = e.isnan() & a.isnan()
    bad = ~(torch.isclose(a, e, rtol=rtol, atol=atol) | both_nan)
    count, total = int(bad.sum()), bad.numel()
    flat = bad.flatten().nonzero()
    first = _index(int(flat[0]), tuple(e.shape)) if len(flat) else ()
    diff = (a - e).abs().nan_to_num(nan=float("inf"))
    worst = int(diff.flatten().argmax()) if total else 0
    rel = diff / e.abs().clamp_min(1e-300)
    lines = [
        f"values{_where(path)}: {count} of {total} elements differ ({100.0 * count / max(total, 1):.1f}%)",
        f"  first at index {_fmt(first)}: expected {e[first].item():.6g}, got {a[first].item():.6g}",
        f"  largest absolute error {diff.flatten()[worst].item():.3g} at index {_fmt(_index(worst, tuple(e.shape)))}"
        f", largest relative error {rel.max().item():.3g}",
    ]
    if rtol or atol:
        lines.append(f"  (allowed: atol={atol:g}, rtol={rtol:g})")
    else:
        lines.append("  (compared exactly)")
    return "\n".join(lines)


def compare(expected: Any, actual: Any, path: str = "", *, exact: bool = False, rtol: float | None = None,
            atol: float | None = None, accept: tuple[str, ...] = ()) -> None:
    """Raise Mismatch at the first place `actual` differs from `expected`, walking both structures.

    `accept` names further exception types that count as matching a raised reference exception.
    """
    __tracebackhide__ = True
    if isinstance(expected, dict) and "__raised__" in expected:
        if not (isinstance(actual, dict) and "__raised__" in actual):
            raise Mismatch(f"expected {expected['__raised__']} to be raised{_where(path)}"
                           f" (as PyTorch raises: {expected['message'].splitlines()[0][:200]}), but got {_kind(actual)}")
        wanted = (expected["__raised__"], *accept)
        if not set(wanted) & set(actual.get("mro", ())):
            raise Mismatch(f"expected {' or '.join(wanted)}{_where(path)}, but {actual['__raised__']} was raised: "
                           f"{actual['message'].splitlines()[0][:200] if actual['message'] else ''}")
        return
    if isinstance(actual, dict) and "__raised__" in actual:
        raise Mismatch(f"raised {actual['__raised__']}{_where(path)}: {actual['message'][:500]}")
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"expected a Tensor{_where(path)}, got {_kind(actual)}")
        compare_tensors(expected, actual, path, exact=exact, rtol=rtol, atol=atol)
        return
    if type(expected) is not type(actual):
        raise Mismatch(f"expected {_kind(expected)}{_where(path)} ({expected!r:.80}), got {_kind(actual)} ({actual!r:.80})")
    if isinstance(expected, dict):
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            raise Mismatch(f"keys{_where(path)}: missing {missing}, unexpected {extra}")
        for key in expected:
            compare(expected[key], actual[key], f"{path}[{key!r}]", exact=exact, rtol=rtol, atol=atol, accept=accept)
        return
    if isinstance(expected, (list, tuple)):
        if len(expected) != len(actual):
            raise Mismatch(f"length{_where(path)}: expected {len(expected)} items {expected!r:.120}, "
                           f"got {len(actual)} {actual!r:.120}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, f"{path}[{i}]", exact=exact, rtol=rtol, atol=atol, accept=accept)
        return
    if isinstance(expected, float) and not exact:
        tolerance = (atol if atol is not None else 1e-7) + (rtol if rtol is not None else 1e-6) * abs(expected)
        if not (abs(expected - actual) <= tolerance or (expected != expected and actual != actual)):
            raise Mismatch(f"value{_where(path)}: expected {expected!r}, got {actual!r}")
        return
    if expected != actual:
        raise Mismatch(f"value{_where(path)}: expected {expected!r:.200}, got {actual!r:.200}")
