"""Messages in English and Chinese: one catalogue, one current language.

The language is chosen once per process: ``set_language`` (the CLI's ``--lang``, the plugin's
``--lang``), else the ``TORCHGRADE_LANG`` environment variable (so batch workers and other tools
inherit it), else English. Every string a student reads goes through ``t(key, **values)``; a test
checks that both languages have every key with the same placeholders.
"""

from __future__ import annotations

import os

LANGUAGES = ("en", "zh")
LANG_HELP = "Language of messages and reports: en (English) or zh (中文). Default: $TORCHGRADE_LANG, else en."
_current: str | None = None


def set_language(lang: str | None) -> None:
    """Use `lang` for every message from now on (None: back to the environment's default)."""
    if lang is not None and lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r} (expected one of {', '.join(LANGUAGES)})")
    global _current
    _current = lang


def language() -> str:
    """The current language: set_language's, else $TORCHGRADE_LANG, else en."""
    if _current is not None:
        return _current
    env = os.environ.get("TORCHGRADE_LANG", "").strip().lower()[:2]
    return env if env in LANGUAGES else "en"


def t(key: str, lang: str | None = None, /, **values: object) -> str:
    """The message `key` in `lang` (default: the current language), formatted with `values`."""
    entry = MESSAGES[key]
    return entry[lang or language()].format(**values)


def fact(key: str, lang: str | None = None) -> str | None:
    """The words for a probe's fact key (``shares_storage_with_input``), or None when unknown."""
    entry = FACTS.get(key) or _course_facts.get(key)
    return (entry.get(lang or language()) or entry["en"]) if entry else None


_course_facts: dict[str, dict[str, str]] = {}


def use_course_facts(facts: dict[str, dict[str, str]]) -> None:
    """Words for the keys a course's own probes report (its hints file's `facts`)."""
    global _course_facts
    _course_facts = dict(facts)


#: What a built-in probe reports, in words: the top-level keys of probe outcomes (torchgrade/sandbox/probes);
#: a course's hints file adds words for its own probes' keys.
FACTS: dict[str, dict[str, str]] = {
    "value": {"en": "the result", "zh": "结果"},
    "shape": {"en": "the shape of the result", "zh": "结果的形状"},
    "stride": {"en": "the strides of the result", "zh": "结果的步长（stride）"},
    "storage_offset": {"en": "the storage offset of the result", "zh": "结果在存储中的偏移（storage_offset）"},
    "shares_storage_with_input": {"en": "whether the result shares memory with the input",
                                  "zh": "结果是否与输入共享内存"},
    "input_after_writing_through_result": {
        "en": "the input after writing 1, 2, 3, ... through the result (writes through a view show in its input)",
        "zh": "通过结果写入 1, 2, 3, ... 之后的输入（通过 view 写入会反映到原张量）"},
    "returned_the_target_itself": {"en": "whether it returned the target tensor itself",
                                   "zh": "是否返回了目标张量本身"},
    "target_storage_unchanged": {"en": "whether the target kept its own memory (was changed in place)",
                                 "zh": "目标张量是否保留了原来的内存（原地修改）"},
    "target_after": {"en": "the target tensor after the call", "zh": "调用之后的目标张量"},
    "raised": {"en": "the exception raised", "zh": "抛出的异常"},
    "grads": {"en": "the gradients that reached the inputs", "zh": "传回输入的梯度"},
    "grad": {"en": "the gradient", "zh": "梯度"},
    "parameters": {"en": "the registered parameters (names and shapes)", "zh": "注册的参数（名称与形状）"},
    "losses": {"en": "the loss after each training step", "zh": "每一步训练后的损失"},
    "state": {"en": "the parameters after training", "zh": "训练后的参数"},
    # the ddp_* probes of parallel.py: facts of two ranks
    "same_on_every_rank": {"en": "whether every rank holds the same values (parameters and buffers, or gradients)",
                           "zh": "各进程（rank）上的值是否相同（参数与缓冲区，或梯度）"},
    "same_losses_on_every_rank": {"en": "whether every rank returned the same loss (the mean over all ranks, not "
                                        "the rank's own)",
                                  "zh": "各进程返回的损失是否相同（应为所有进程的平均损失，而不是本进程自己的损失）"},
    "parameters_and_buffers": {"en": "the parameters and buffers on each rank", "zh": "各进程上的参数与缓冲区"},
    "parameters_kept": {"en": "whether each parameter is still the same tensor object (copied into in place, so an "
                              "optimizer built before keeps updating it)",
                        "zh": "每个参数是否仍是原来的张量对象（原地复制，之前创建的优化器才能继续更新它）"},
    "requires_grad": {"en": "each parameter's requires_grad", "zh": "每个参数的 requires_grad"},
    "gradients": {"en": "the gradients on each rank", "zh": "各进程上的梯度"},
    "wrapper_type": {"en": "the type of the wrapped model", "zh": "包装后模型的类型"},
    "wraps_the_model": {"en": "whether wrapped.module is the model it was given", "zh": "wrapped.module 是否就是传入的模型"},
    "device_ids": {"en": "the wrapper's device_ids", "zh": "包装器的 device_ids"},
}

MESSAGES: dict[str, dict[str, str]] = {
    # --- compare.py: what differs -------------------------------------------------------------
    "shape": {"en": "{what} has the wrong shape: expected {expected}, got {actual}",
              "zh": "{what}的形状不对：应为 {expected}，实际为 {actual}"},
    "dtype": {"en": "{what} has the wrong dtype: expected {expected}, got {actual}",
              "zh": "{what}的数据类型（dtype）不对：应为 {expected}，实际为 {actual}"},
    "device": {"en": "{what} is on the wrong device: expected it on {expected}, got it on {actual}",
               "zh": "{what}所在设备不对：应在 {expected} 上，实际在 {actual} 上"},
    "values": {"en": "{what}: {count} of {total} elements differ ({percent}%)",
               "zh": "{what}：{total} 个元素中有 {count} 个不同（{percent}%）"},
    "values_first": {"en": "  first difference at index {index}: expected {expected}, got {actual}",
                     "zh": "  第一个不同的元素在下标 {index}：应为 {expected}，实际为 {actual}"},
    "values_largest": {"en": "  largest absolute error {abs_error} at index {index}; largest relative error {rel_error}",
                       "zh": "  最大绝对误差 {abs_error}（下标 {index}）；最大相对误差 {rel_error}"},
    "values_nan": {"en": "  {count} of them NaN where a number was expected (the first at index {index})",
                   "zh": "  其中 {count} 个应为数值，实际为 NaN（第一个在下标 {index}）"},
    "values_not_nan": {"en": "  {count} of them a number where NaN was expected (the first at index {index})",
                       "zh": "  其中 {count} 个应为 NaN，实际为数值（第一个在下标 {index}）"},
    "values_allowed": {"en": "  (allowed: atol={atol}, rtol={rtol})", "zh": "  （允许误差：atol={atol}，rtol={rtol}）"},
    "values_exact": {"en": "  (compared exactly)", "zh": "  （要求完全相等）"},
    "values_expected": {"en": "  expected: {value}", "zh": "  应为：{value}"},
    "values_actual": {"en": "  got:      {value}", "zh": "  实际：{value}"},
    "not_raised": {"en": "expected {exception} to be raised ({message}), but the call returned {kind}",
                   "zh": "应当抛出 {exception}（{message}），但调用返回了{kind}"},
    "not_raised_at": {"en": "{what}: expected {exception} to be raised ({message}), but got {kind}",
                      "zh": "{what}：应当抛出 {exception}（{message}），实际得到{kind}"},
    "not_raised_like": {"en": "expected {exception} to be raised (as {like} does: {message}), but the call returned "
                              "{kind}",
                        "zh": "应当抛出 {exception}（{like} 的报错：{message}），但调用返回了{kind}"},
    "not_raised_at_like": {"en": "{what}: expected {exception} to be raised (as {like} does: {message}), but got {kind}",
                           "zh": "{what}：应当抛出 {exception}（{like} 的报错：{message}），实际得到{kind}"},
    "wrong_exception": {"en": "expected {expected} to be raised, but {actual} was raised: {message}",
                        "zh": "应当抛出 {expected}，实际抛出了 {actual}：{message}"},
    "raised": {"en": "your code raised {exception}: {message}", "zh": "你的代码抛出了 {exception}：{message}"},
    "raised_at": {"en": "{what}: your code raised {exception}: {message}",
                  "zh": "{what}：你的代码抛出了 {exception}：{message}"},
    "kind": {"en": "{what}: expected {expected_kind} ({expected}), got {actual_kind} ({actual})",
             "zh": "{what}：应为{expected_kind}（{expected}），实际为{actual_kind}（{actual}）"},
    "keys_missing": {"en": "{what}: missing {missing}", "zh": "{what}：缺少 {missing}"},
    "keys_extra": {"en": "{what}: unexpected {extra}", "zh": "{what}：多出了 {extra}"},
    "length": {"en": "{what}: expected {expected_len} items {expected}, got {actual_len} {actual}",
               "zh": "{what}：应有 {expected_len} 项 {expected}，实际有 {actual_len} 项 {actual}"},
    "value": {"en": "{what}: expected {expected}, got {actual}", "zh": "{what}：应为 {expected}，实际为 {actual}"},
    "kind_tensor": {"en": "a Tensor", "zh": "张量（Tensor）"},
    "kind_none": {"en": "None", "zh": "None"},
    "kind_normally": {"en": "normally (no exception)", "zh": "正常结果（没有抛出异常）"},
    "kind_exception": {"en": "an exception ({name})", "zh": "异常（{name}）"},
    "kind_other": {"en": "a {name}", "zh": " {name} 类型的值"},
    # --- differential.py: the call, and failures outside the comparison -----------------------
    "called": {"en": "called: {call}", "zh": "调用：{call}"},
    "seed": {"en": "[inputs from seed {seed}]", "zh": "[输入由随机种子 {seed} 生成]"},
    "tensor": {"en": "{dtype} tensor of shape {shape}", "zh": "形状为 {shape} 的 {dtype} 张量"},
    "non_contiguous": {"en": " (non-contiguous, strides {stride})", "zh": "（非连续，步长 {stride}）"},
    "on_device": {"en": " on {device}", "zh": "（在 {device} 上）"},
    "not_implemented": {"en": "{name} is not implemented yet (it raises NotImplementedError)",
                        "zh": "{name} 还没有实现（它抛出了 NotImplementedError）"},
    "not_implemented_part": {"en": "{name}.{part} is not implemented yet (it raises NotImplementedError)",
                             "zh": "{name}.{part} 还没有实现（它抛出了 NotImplementedError）"},
    "unknown_probe": {"en": "this check asks for the probe '{probe}', which neither torchgrade nor the course "
                            "defines{near}",
                      "zh": "这项检查要求的探针 '{probe}' 既不是 torchgrade 内置的，也不是课程定义的{near}"},
    "did_you_mean": {"en": " (did you mean '{name}'?)", "zh": "（是否应为 '{name}'？）"},
    "traceback": {"en": "where your code raised it:", "zh": "你的代码中抛出异常的位置："},
    "missing_module": {"en": "{exercise}.py is missing: its {points} points are not graded",
                       "zh": "缺少 {exercise}.py：它的 {points} 分没有评测"},
    "missing_name": {"en": "{exercise}.py defines no `{name}`", "zh": "{exercise}.py 中没有定义 `{name}`"},
    "import_error": {"en": "{exercise}.py could not be imported ({error}), so none of its exercises can be graded:",
                     "zh": "无法导入 {exercise}.py（{error}），因此其中的练习都无法评测："},
    "skip_no_cuda": {"en": "CUDA is not available on this machine; its points are set aside, not counted",
                     "zh": "这台电脑上没有可用的 CUDA；这些检查的分数暂不计入，也不扣分"},
    "skip_not_chosen": {"en": "not graded on {device}: --device {chosen} was chosen",
                        "zh": "未在 {device} 上评测：选择了 --device {chosen}"},
    # --- the CUDA stand-in (torchgrade/sandbox/standin.py, docs/devices.md) ---
    "standin_found": {
        "en": "found without a GPU, by the CUDA stand-in (this machine has no CUDA: the inputs were on a stand-in "
              "for cuda:0 that places tensors as a GPU does); on a GPU this check fails the same way",
        "zh": "本机没有 GPU，由 CUDA 替身发现（本机没有 CUDA：输入放在一个替代 cuda:0 的设备上，它按 GPU 的规则放置张量）；"
              "在 GPU 上这项检查会以同样的方式失败"},
    "standin_device_hint": {
        "en": "On a GPU, a tensor made on the CPU meets (or is returned instead of) tensors on the GPU: make new "
              "tensors where the inputs are: pass `device=x.device` (and `dtype=x.dtype`) to torch.zeros/ones/tensor/arange, or "
              "use torch.zeros_like(x) or x.new_zeros(...); never .cpu(), .numpy() or device=\"cpu\" on the way",
        "zh": "在 GPU 上，在 CPU 上创建的张量与 GPU 上的张量相遇（或被当作结果返回）。请在输入所在的设备上创建新张量："
              "给 torch.zeros/ones/tensor/arange 传入 `device=x.device`（以及 `dtype=x.dtype`），或使用 "
              "torch.zeros_like(x)、x.new_zeros(...)；中途不要用 .cpu()、.numpy() 或 device=\"cpu\""},
    "standin_made_at": {"en": "the CPU tensor was made at {where}", "zh": "这个 CPU 张量创建于 {where}"},
    "standin_set_aside": {
        "en": "CUDA is not available on this machine, and the CUDA stand-in does not grade this check: {reason}; "
              "its points are set aside",
        "zh": "这台电脑上没有可用的 CUDA，CUDA 替身也不评测这项检查：{reason}；这项检查的分数暂不计入"},
    "standin_student_unsupported": {
        "en": "your code did something the CUDA stand-in cannot model ({reason}), where the reference did not, so this "
              "CUDA check cannot tell whether it works on a GPU; it counts as failed here: grade it on a machine with "
              "a GPU, or do the same work with tensor operations",
        "zh": "你的代码做了 CUDA 替身无法模拟的事（{reason}），而参考答案没有，所以这项 CUDA 检查无法判断它在 GPU 上是否可行；"
              "在这里算作未通过：请在有 GPU 的机器上评测，或用张量运算完成同样的工作"},
    "standin_warning": {
        "en": "warning only (this course's cuda_standin: warn; no points lost): {text}",
        "zh": "仅为警告（本课程设置 cuda_standin: warn；不扣分）：{text}"},
    "standin_not_counted": {
        "en": "passed on the CUDA stand-in; not counted (this course's cuda_standin: warn)",
        "zh": "在 CUDA 替身上通过；不计分（本课程设置 cuda_standin: warn）"},
    "standin_graded": {
        "en": "CUDA checks: graded on the CUDA stand-in, not a GPU (cuda_standin: {policy}); device facts on cuda "
              "come from the stand-in, values from the CPU",
        "zh": "CUDA 检查：由 CUDA 替身评测，而非 GPU（cuda_standin: {policy}）；cuda 上的设备信息来自替身，数值来自 CPU"},
    "adjusted": {"en": "adjusted by the instructor: {reason}", "zh": "教师已调整：{reason}"},
    "adjusted_scope": {"en": "{scope}: {points} of {max_score} points", "zh": "{scope}：{points} / {max_score} 分"},
    "grader_error": {"en": "grader error (not your fault; please report it): {error}",
                     "zh": "评测程序出错（不是你的问题，请报告）：{error}"},
    # bounds.py and the student's copy of a grade (results.py)
    "budget_exceeded": {"en": "the grader stopped comparing your result after {seconds} s, its limit for one check: "
                              "return a result of the kind and size the exercise asks for",
                        "zh": "评测程序比较你的结果超过了每项检查的上限 {seconds} 秒，已停止：请返回题目要求的类型和大小的结果"},
    "hidden_check_details": {"en": "a hidden check: its inputs, output and messages are in the instructor's copy",
                             "zh": "隐藏检查：其输入、输出和信息只在教师的副本中"},
    "scored_zero": {"en": "scored zero: {why}", "zh": "记零分：{why}"},
    "verdict_lost": {"en": "the grader could not read what this call ran: a later check of this target ended its "
                           "sandbox process (it crashed, exited or ran past its time limit) first, so nothing vouches "
                           "for this result. Fix that check's failure and this one is graded again.",
                     "zh": "评分器未能读取这次调用运行了什么：该目标后面的一项检查先结束了沙箱进程（崩溃、退出或超时），"
                           "因此无法为这个结果作证。修正那项检查的失败后，这一项会重新评分。"},
    "forbidden_in_a_hidden_check": {"en": "a hidden check of this target found a forbidden call (its message is in "
                                          "the instructor's copy)",
                                    "zh": "该目标的一项隐藏检查发现了禁止的调用（其信息只在教师的副本中）"},
    "sandbox_unavailable": {"en": "the sandbox cannot start on this computer: {why}",
                            "zh": "沙箱无法在这台电脑上启动：{why}"},
    "checks_did_not_pass": {"en": "{count} graded checks did not pass (exit status 1)",
                            "zh": "有 {count} 项计分检查没有通过（退出状态 1）"},
    "incomplete_reply": {"en": "the sandbox sent an incomplete reply", "zh": "沙箱返回的结果不完整"},
    "hint": {"en": "hint: {text}", "zh": "提示：{text}"},
    # --- terminal and report -----------------------------------------------------------------
    "score": {"en": "score", "zh": "得分"},
    "score_line": {"en": "score: {score} ({percent}%)   {graded_on}", "zh": "得分：{score}（{percent}%）   {graded_on}"},
    "graded_on": {"en": "graded on: {devices}", "zh": "评测设备：{devices}"},
    "no_device": {"en": "no device", "zh": "无"},
    "seconds": {"en": "{seconds} s", "zh": "{seconds} 秒"},
    "isolation": {"en": "isolation: {isolation}", "zh": "隔离方式：{isolation}"},
    "watch": {"en": "watch: {watch}", "zh": "调用监视：{watch}"},
    "isolation_process": {
        "en": "Graded at isolation 'process', without a sandbox between submissions: this score could have been "
              "forged by another submission graded in the same run (see SECURITY.md).",
        "zh": "本次评测的隔离方式为 'process'（提交之间没有沙箱）：同一批评测中的其他提交可能伪造了这个分数（见 SECURITY.md）。"},
    "status_passed": {"en": "passed", "zh": "通过"},
    "status_failed": {"en": "failed", "zh": "未通过"},
    "status_error": {"en": "error", "zh": "出错"},
    "status_skipped": {"en": "skipped", "zh": "跳过"},
    "status_not_implemented": {"en": "not implemented yet", "zh": "尚未实现"},
    "checks_failed": {"en": "{failed} of {total} checks failed", "zh": "{total} 项检查中有 {failed} 项未通过"},
    "checks_passed": {"en": "{count} checks passed", "zh": "{count} 项检查通过"},
    "checks_skipped": {"en": "{count} checks skipped", "zh": "{count} 项检查被跳过"},
    "checks_all": {"en": "all {count} checks", "zh": "全部 {count} 项检查"},
    "more_failures": {"en": "... and {count} more failing checks of {target} (all of them are in the report)",
                      "zh": "……{target} 另有 {count} 项检查未通过（详见报告）"},
    "more_lines": {"en": "... ({count} more lines in the report)", "zh": "……（还有 {count} 行，详见报告）"},
    "skipped_because": {"en": "{count} checks skipped: {reason}", "zh": "{count} 项检查被跳过：{reason}"},
    "rerun": {"en": "rerun: {command}", "zh": "重新运行：{command}"},
    "rerun_label": {"en": "rerun this check", "zh": "单独重跑这项检查"},
    "report_at": {"en": "report: {path}", "zh": "报告：{path}"},
    "watching": {"en": "watching {folder} for changes (Ctrl-C to stop)", "zh": "正在监视 {folder} 中的修改（按 Ctrl-C 停止）"},
    "rechecked": {"en": "[{clock}] {modules}: {score} in {seconds:.2f} s · total {total} ({percent}%)",
                  "zh": "[{clock}] {modules}：{score}，用时 {seconds:.2f} 秒 · 总分 {total}（{percent}%）"},
    "hidden": {"en": "hidden", "zh": "隐藏"},
    "hidden_note": {"en": "Hidden checks are shown by name and verdict only.",
                    "zh": "隐藏检查只显示名称和结果。"},
    "exercises": {"en": "Exercises", "zh": "练习"},
    "target": {"en": "target", "zh": "目标"},
    "points": {"en": "points", "zh": "分数"},
    "check": {"en": "check", "zh": "检查"},
    "device_col": {"en": "device", "zh": "设备"},
    "status": {"en": "status", "zh": "状态"},
    "printed_output": {"en": "Printed output", "zh": "程序输出"},
    "printed_by": {"en": "printed by {key}", "zh": "{key} 的输出"},
    "notes": {"en": "Notes", "zh": "说明"},
    "expand_all": {"en": "Expand all", "zh": "全部展开"},
    "collapse_all": {"en": "Collapse all", "zh": "全部折叠"},
    "all_passed": {"en": "All checks passed.", "zh": "所有检查均已通过。"},
    "report_title": {"en": "{title}: {submission}", "zh": "{title}：{submission}"},
}
