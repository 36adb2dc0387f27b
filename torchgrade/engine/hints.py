"""Hints for a stuck student, keyed by check, target or exercise, and by fact or failure kind: the
course's, then the engine's.

A failing check's message ends with the hint of the most specific entry that matches: the check
(``tensors.view::test_infers_minus_one``), then the target (``tensors.view``), then its exercise
(``tensors``) from the course's hints file (``hints:`` in assignment.yaml, ``load_course_hints``),
then the engine's defaults here (``*``). At each of those, a hint for the fact of the probe's result
that differed (``facts: {heads: ...}``: the first differing key) comes before one for the failure's
kind. Kinds come from the comparison (``torchgrade.engine.compare.Mismatch.kind``), refined by which fact of
the outcome differed (``failure_kind``), or from the differential itself (``forbidden``,
``timeout``, ...). Every engine hint is written in English and Chinese; a course's may give English only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from torchgrade.engine.i18n import LANGUAGES, language

if TYPE_CHECKING:
    from torchgrade.engine.compare import Mismatch

#: A hint in each language: {"en": ..., "zh": ...}.
Hint = dict[str, str]

#: Which fact of a probe's outcome differed -> the kind of failure it is.
_FACT_KINDS = {
    "stride": "stride",
    "storage_offset": "stride",
    "shares_storage_with_input": "storage",
    "input_after_writing_through_result": "storage",
    "returned_the_target_itself": "inplace",
    "target_storage_unchanged": "inplace",
    "grads": "grad",
    "grad": "grad",
}
#: Failure kinds a hint may be written for.
KINDS = ("shape", "dtype", "device", "values", "value", "kind", "keys", "length", "raised", "not_raised",
         "wrong_exception", "stride", "storage", "inplace", "grad", "forbidden", "timeout", "crashed", "import",
         "missing", "probe")


def failure_kind(mismatch: Mismatch) -> str:
    """The kind of a comparison failure, refined by the fact that differed (strides, storage, grads)."""
    from torchgrade.engine.compare import path_parts  # (imports torch: loading a course's hints, as `grade`'s parent does, need not)

    parts = path_parts(mismatch.path)
    if parts and isinstance(parts[0], str) and parts[0] in _FACT_KINDS and mismatch.kind not in (
            "raised", "not_raised", "wrong_exception", "device"):
        return _FACT_KINDS[parts[0]]
    return mismatch.kind


#: How a hint for a fact is keyed beside the kinds: (where, FACT + key).
FACT = "fact:"


def hint(qualname: str, kind: str, lang: str | None = None,
         course: dict[tuple[str, str], Hint] | None = None, *, check: str | None = None,
         fact: str | None = None) -> str | None:
    """The hint for a failure of `kind` in `qualname` (``exercise.target``), or None; `check` (the check's
    function name) and `fact` (the first differing key of the probe's result) pick more specific ones."""
    exercise = qualname.split(".")[0]
    places = ([f"{qualname}::{check}"] if check else []) + [qualname, exercise]
    keys = [(where, wanted) for where in places
            for wanted in ([FACT + fact] if fact else []) + [kind]] + [("*", kind)]
    for key in keys:
        entry = (course or {}).get(key) or HINTS.get(key)
        if entry:
            return entry.get(lang or language()) or entry["en"]
    return None


class HintsError(Exception):
    """A course's hints file is wrong; the message names the file and the entry."""


def load_course_hints(path: Path) -> tuple[dict[tuple[str, str], Hint], dict[str, Hint]]:
    """A course's hints file: ({(target or exercise, kind): hint}, {fact key: words}); empty if there is none."""
    if not path.is_file():
        return {}, {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise HintsError(f"{path}: cannot be read as YAML ({e})") from None
    if not isinstance(data, dict) or set(data) - {"hints", "facts"}:
        raise HintsError(f"{path}: expected a mapping with the keys hints and facts")
    hints: dict[tuple[str, str], Hint] = {}
    for where, kinds in (data.get("hints") or {}).items():
        if not isinstance(kinds, dict):
            raise HintsError(f"{path}: hints.{where}: expected a mapping of failure kinds")
        for kind, entry in kinds.items():
            if kind == "facts":  # facts: {key of the probe's result: hint}, for when that key differs first
                if not isinstance(entry, dict):
                    raise HintsError(f"{path}: hints.{where}.facts: expected a mapping of a probe's keys to hints")
                for key, text in entry.items():
                    hints[(str(where), FACT + str(key))] = _entry(text, path, f"hints.{where}.facts.{key}")
                continue
            if kind not in KINDS:
                raise HintsError(f"{path}: hints.{where}.{kind}: unknown failure kind (one of: {', '.join(KINDS)})")
            hints[(str(where), kind)] = _entry(entry, path, f"hints.{where}.{kind}")
    facts = {str(key): _entry(entry, path, f"facts.{key}") for key, entry in (data.get("facts") or {}).items()}
    return hints, facts


def _entry(entry: Any, path: Path, where: str) -> Hint:
    """{"en": text, "zh": text}; a plain string is English."""
    if isinstance(entry, str):
        entry = {"en": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("en"), str) or \
            not set(entry) <= set(LANGUAGES) or not all(isinstance(v, str) for v in entry.values()):
        raise HintsError(f"{path}: {where}: expected text, or a mapping with en (and zh) text")
    return dict(entry)


def _h(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


HINTS: dict[tuple[str, str], dict[str, str]] = {
    # --- any target ---------------------------------------------------------------------------
    ("*", "device"): _h(
        "create new tensors on the input's device (torch.zeros(..., device=x.device), x.new_zeros(...), "
        "torch.zeros_like(x)); a bare torch.zeros(...) lands on the CPU.",
        "新建张量时指定输入所在的设备（torch.zeros(..., device=x.device)、x.new_zeros(...)、torch.zeros_like(x)）；"
        "直接写 torch.zeros(...) 会建在 CPU 上。"),
    ("*", "dtype"): _h(
        "follow the input's dtype: torch.zeros(..., dtype=x.dtype) or x.new_zeros(...); torch.tensor([...]) of "
        "Python ints gives int64 and of floats gives float32.",
        "结果的 dtype 应与输入一致：用 torch.zeros(..., dtype=x.dtype) 或 x.new_zeros(...)；"
        "torch.tensor([...]) 由整数得到 int64，由小数得到 float32。"),
    ("*", "shape"): _h(
        "print the shapes of your intermediate tensors on the input shown above; a missing or extra "
        "dimension of size 1 is the usual culprit.",
        "用上面给出的输入打印中间张量的形状；最常见的问题是多了或少了一个大小为 1 的维度。"),
    ("*", "not_raised"): _h(
        "this input must raise an error; check the arguments before computing and raise an exception type "
        "named above.",
        "这个输入应当报错；请在计算之前检查参数，并抛出上面列出的异常类型之一。"),
    ("*", "wrong_exception"): _h(
        "raise one of the exception types named above (the docstring names them), not another.",
        "请抛出上面列出的异常类型之一（文档字符串中写明了），不要抛出其它类型。"),
    ("*", "grad"): _h(
        "the forward values are right but the gradients are not: keep every step differentiable (no .item(), "
        ".detach(), .data, torch.tensor(...) or numpy in between) and do not write into tensors that autograd needs.",
        "前向结果正确但梯度不对：中间不要用 .item()、.detach()、.data、torch.tensor(...) 或 numpy，"
        "也不要原地修改 autograd 需要的张量。"),
    ("*", "forbidden"): _h(
        "the point of the exercise is to build this yourself: use only the operations its docstring allows.",
        "这道题的目的就是自己实现它：只使用文档字符串里允许的操作。"),
    ("*", "timeout"): _h(
        "look for a loop that never ends or a Python loop over every element of a big tensor; use tensor "
        "operations instead.",
        "检查是否有死循环，或者对大张量的每个元素做 Python 循环；请改用张量运算。"),
    ("*", "crashed"): _h(
        "the process running your code died: very large allocations, recursion without end, or calling "
        "sys.exit()/os._exit() do that.",
        "运行你代码的进程意外退出：分配过大的内存、无限递归、调用 sys.exit()/os._exit() 都会导致这种情况。"),
    ("*", "import"): _h(
        "run `python -c \"import <module>\"` in your exercises folder to see the error; code at module level "
        "runs on import.",
        "在 exercises 目录下运行 `python -c \"import <模块名>\"` 查看错误；模块顶层的代码在导入时就会执行。"),
}
