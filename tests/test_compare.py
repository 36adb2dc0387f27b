"""Comparison messages, read as a stuck student reads them: what differs, in words, expected and got."""

import pytest
import torch

from torchgrade.engine import i18n
from torchgrade.engine.compare import Mismatch, compare, describe_path


def mismatch(expected, actual, **options) -> Mismatch:
    with pytest.raises(Mismatch) as info:
        compare(expected, actual, **options)
    return info.value


@pytest.fixture
def zh():
    i18n.set_language("zh")
    yield
    i18n.set_language(None)


def test_shape_dtype_and_device_come_before_values():
    e = torch.zeros(2, 3)
    assert str(mismatch(e, torch.zeros(3, 2))) == "the result has the wrong shape: expected (2, 3), got (3, 2)"
    assert str(mismatch(e, torch.zeros(2, 3, dtype=torch.float64))) == \
        "the result has the wrong dtype: expected torch.float32, got torch.float64"
    assert mismatch(e, torch.zeros(2, 3, dtype=torch.int64)).kind == "dtype"


def test_a_value_mismatch_gives_the_count_the_first_index_with_both_values_and_the_largest_errors():
    expected = torch.arange(12.0).reshape(3, 4)
    actual = expected.clone()
    actual[1, 2] = 60.0
    actual[2, 3] = 11.5
    error = mismatch(expected, actual)
    assert error.kind == "values"
    assert str(error).splitlines() == [
        "the result: 2 of 12 elements differ (16.7%)",
        "  first difference at index (1, 2): expected 6, got 60",
        "  largest absolute error 54 at index (1, 2); largest relative error 9",
        "  (allowed: atol=1e-05, rtol=1.3e-06)",
        "  expected: [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]",
        "  got:      [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 60.0, 7.0], [8.0, 9.0, 10.0, 11.5]]",
    ]


def test_integer_results_are_compared_exactly_and_big_tensors_are_not_printed():
    expected = torch.arange(100)
    actual = expected.clone()
    actual[42] = 0
    lines = str(mismatch(expected, actual)).splitlines()
    assert lines == ["the result: 1 of 100 elements differ (1.0%)",
                     "  first difference at index (42,): expected 42, got 0",
                     "  (compared exactly)"]


def test_a_nan_is_described_as_nan_and_the_errors_are_those_of_the_numbers():
    expected = torch.tensor([1.0, 2.0, 3.0, float("nan")])
    lines = str(mismatch(expected, torch.tensor([1.0, float("nan"), 3.5, 4.0]))).splitlines()
    assert lines[:4] == ["the result: 3 of 4 elements differ (75.0%)",
                         "  first difference at index (1,): expected 2, got NaN",
                         "  1 of them NaN where a number was expected (the first at index (1,))",
                         "  1 of them a number where NaN was expected (the first at index (3,))"]
    assert lines[4] == "  largest absolute error 0.5 at index (2,); largest relative error 0.167"
    only_nan = str(mismatch(torch.ones(3), torch.full((3,), float("nan"))))
    assert "3 of them NaN where a number was expected" in only_nan and "inf" not in only_nan, only_nan


def test_the_relative_error_ignores_elements_whose_expected_value_is_zero():
    text = str(mismatch(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 3.0])))
    assert "largest relative error 0.5" in text


def test_probe_facts_are_named_in_words_with_their_key():
    expected = {"value": torch.zeros(2), "stride": (3, 1), "shares_storage_with_input": True}
    actual = {"value": torch.zeros(2), "stride": (1, 2), "shares_storage_with_input": True}
    error = mismatch(expected, actual)
    # the whole stride tuple, not its first element
    assert str(error) == "the strides of the result ['stride']: expected (3, 1), got (1, 2)"
    assert (error.kind, error.path) == ("value", "['stride']")
    actual.update(stride=(3, 1), shares_storage_with_input=False)
    assert str(mismatch(expected, actual)) == ("whether the result shares memory with the input "
                                               "['shares_storage_with_input']: expected True, got False")


@pytest.mark.parametrize("path, words", [
    ("", "the result"),
    ("['value']", "the result"),
    ("[1]", "the result [1]"),
    ("['grads'][0]", "the gradients that reached the inputs ['grads'][0]"),
    ("['some_new_fact']", "the result ['some_new_fact']"),
])
def test_describe_path(path, words):
    assert describe_path(path) == words


def test_exceptions_expected_missing_or_of_another_type():
    raised = {"__raised__": "RuntimeError", "mro": ["RuntimeError", "Exception"],
              "message": "shape '[4, 2]' is invalid for input of size 6\nmore", "traceback": ""}
    error = mismatch(raised, torch.zeros(4, 2))
    assert error.kind == "not_raised"
    assert str(error) == ("expected RuntimeError to be raised (shape '[4, 2]' is invalid for "
                          "input of size 6), but the call returned a Tensor")
    like = mismatch(raised, torch.zeros(4, 2), like="Tensor.view")
    assert str(like).startswith("expected RuntimeError to be raised (as Tensor.view does: shape '[4, 2]'")
    other = {"__raised__": "ValueError", "mro": ["ValueError", "Exception"], "message": "bad size"}
    assert str(mismatch(raised, other)) == "expected RuntimeError to be raised, but ValueError was raised: bad size"
    compare(raised, {"__raised__": "IndexError", "mro": ["IndexError"], "message": ""}, accept=("IndexError",))
    assert str(mismatch(torch.zeros(1), other)) == "your code raised ValueError: bad size"


def test_structure_mismatches():
    assert str(mismatch({"a": 1}, {"b": 1})) == "the result: missing 'a'"
    assert str(mismatch({"a": 1}, {"a": 1, "b": 1})) == (
        "the result: unexpected 'b'")
    assert str(mismatch([1, 2], [1])) == "the result: expected 2 items [1, 2], got 1 [1]"
    assert str(mismatch(torch.zeros(2), [0.0, 0.0])) == "the result: expected a Tensor ((2,)), got a list ([0.0, 0.0])"
    assert str(mismatch(1.0, 1.1)) == "the result: expected 1.0, got 1.1"
    compare(1.0, 1.0 + 1e-9)


def test_messages_in_chinese(zh):
    assert str(mismatch(torch.zeros(2, 3), torch.zeros(3, 2))) == "结果的形状不对：应为 (2, 3)，实际为 (3, 2)"
    text = str(mismatch({"shares_storage_with_input": True}, {"shares_storage_with_input": False}))
    assert text == "结果是否与输入共享内存 ['shares_storage_with_input']：应为 True，实际为 False"


RAISED = {"__raised__": "RuntimeError", "mro": ["RuntimeError", "Exception"], "message": "bad size", "traceback": ""}


def test_a_probes_facts_are_described_by_the_students_result_not_as_a_dict():
    facts = {"value": torch.zeros(2), "shape": (2,)}
    assert str(mismatch(RAISED, facts)) == "expected RuntimeError to be raised (bad size), but the call returned a Tensor"
    assert str(mismatch(RAISED, {"target_after": torch.zeros(2)})).endswith("but the call returned normally (no exception)")


def test_accepted_exception_types_are_all_named():
    assert str(mismatch(RAISED, 1, accept=("IndexError",))).startswith("expected RuntimeError or IndexError to be raised")


def test_facts_both_sides_report_are_compared_before_a_fact_only_one_reports():
    expected = {"stride": (1,), "value": torch.zeros(2)}
    actual = {"stride": (2,), "value": torch.zeros(2), "input_after_writing_through_result": torch.zeros(2)}
    text = str(mismatch(expected, actual))
    assert text.startswith("the strides of the result ['stride']: expected (1,), got (2,)")
    assert "input_after_writing_through_result" not in text


def test_an_exception_the_probe_reports_as_a_fact_is_named_as_an_exception():
    inplace_raised = {"raised": RAISED, "target_after": torch.zeros(2)}
    returned = {"returned_the_target_itself": True, "target_after": torch.zeros(2)}
    assert str(mismatch(inplace_raised, returned)) == (
        "expected RuntimeError to be raised (bad size), but the call returned normally (no exception)")
    assert str(mismatch(returned, inplace_raised)) == "your code raised RuntimeError: bad size"


@pytest.mark.parametrize("value", [list(range(100)), "x" * 300, {"key": list(range(60))}])
def test_long_values_are_cut_between_values_never_inside_one(value):
    text = str(mismatch(torch.zeros(1), value))
    shown = text.split("got ", 1)[1]
    assert shown.endswith(" ...)")
    assert len(shown) < 100
    if isinstance(value, list):  # every number shown is whole
        numbers = shown.split("(", 1)[1].strip("[ .)").split(", ")
        assert numbers == [str(i) for i in range(len(numbers))]


def test_a_check_may_set_only_rtol_or_only_atol_the_other_keeps_its_default():
    """(torch.testing.assert_close wants both or neither: a check that set one would crash the grader.)"""
    expected = torch.tensor([1.0, 2.0, 4.0])
    close = expected * (1 + 1e-3)
    compare(expected, close, rtol=1e-2)  # within 1%
    compare(expected, expected + 1e-3, atol=1e-2)
    with pytest.raises(Mismatch) as error:
        compare(expected, close, rtol=1e-4)
    assert "rtol=0.0001" in str(error.value)


# --- bounds: what showing a value and writing a message may cost (torchgrade/engine/bounds.py) ------------

def test_a_huge_tensor_of_one_byte_is_shown_by_dtype_and_shape_without_reading_its_elements():
    huge = torch.zeros(1, dtype=torch.bool).as_strided((2,) * 31, (0,) * 31)  # 2**31 elements, one byte
    with pytest.raises(Mismatch) as e:
        compare((2, 3), huge)
    assert "bool tensor of shape (2, 2, 2" in str(e.value) and len(str(e.value)) < 300
    with pytest.raises(Mismatch) as e:  # inside a list, and a list of a million of them
        compare([1, 2], [huge] * 1_000_000)
    assert "expected 2 items" in str(e.value) and len(str(e.value)) < 400


def test_a_preview_costs_what_its_length_needs_whatever_the_value():
    from torchgrade.engine.bounds import preview

    assert preview(torch.tensor([1, 2])) == repr(torch.tensor([1, 2]))
    assert preview([1, (2,), {"a": None}]) == repr([1, (2,), {"a": None}])
    assert preview("x" * 10**8, 20).startswith("'xxxxxxxx") and len(preview("x" * 10**8, 20)) <= 20
    assert preview(10**100000).startswith("<an int of")  # repr would refuse (over 4300 digits)
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    assert len(preview(deep, 50)) <= 50  # neither deep nor long nesting costs more than the text


def test_a_message_names_a_few_unexpected_keys_each_cut_short():
    actual = {f"{i:04d}" + "p" * 1996: (1,) for i in range(3000)}
    with pytest.raises(Mismatch) as e:
        compare({}, actual)
    message = str(e.value)
    assert "unexpected '0000ppp" in message and "(and 2992 more)" in message and len(message) < 1000
    with pytest.raises(Mismatch) as e:  # a key in the path of a difference is cut too
        compare({"k" * 5000: 1}, {"k" * 5000: 2})
    assert len(str(e.value)) < 400


def test_a_message_is_cut_to_its_cap_and_keeps_its_hint():
    from torchgrade.engine.bounds import MESSAGE_CHARS, clip_message

    text = "called: f()\n" + "x" * 10**6 + "\nhint: look at the shape"
    cut = clip_message(text, keep_last_line=True)
    assert len(cut) < MESSAGE_CHARS + 600 and cut.startswith("called: f()") and cut.endswith("hint: look at the shape")
    assert "more characters cut" in cut
    assert clip_message("short\nhint: h", keep_last_line=True) == "short\nhint: h"


def test_the_time_budget_interrupts_the_trusted_sides_work_and_leaves_no_timer_behind():
    import signal

    from torchgrade.engine.bounds import BudgetExceeded, time_budget

    with pytest.raises(BudgetExceeded):
        with time_budget(0.05):
            while True:
                pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with time_budget(5):
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


CLOSE_CASES = [  # (actual, expected, options): each as torch.testing.assert_close judges it
    (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]), {"equal_nan": True}),
    (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]), {}),
    (torch.tensor([1.0 + 1e-7]), torch.tensor([1.0]), {}),
    (torch.tensor([1.1]), torch.tensor([1.0]), {}),
    (torch.tensor([1.1]), torch.tensor([1.0]), {"rtol": 0.2, "atol": 0.0}),
    (torch.tensor([3], dtype=torch.int64), torch.tensor([4], dtype=torch.int64), {"rtol": 0.0, "atol": 0.0}),
    (torch.tensor([1 + 1j]), torch.tensor([1 + 1.5j]), {"check_device": False}),
]


@pytest.mark.parametrize("actual, expected, options", CLOSE_CASES)
def test_values_are_judged_as_torch_testing_assert_close_judges_them(actual, expected, options):
    from torchgrade.engine.compare import assert_close_plain

    def verdict(function):
        try:
            function(actual, expected, **options)
        except AssertionError as e:
            return str(e)
        return None

    assert verdict(assert_close_plain) == verdict(torch.testing.assert_close)


def test_a_comparison_does_not_import_the_distributed_tensor_package_and_leaves_torch_as_it_was():
    # (torch 2.10+ imports torch.distributed.tensor at assert_close's first call, to unwrap DTensors
    # that never reach a comparison here: 0.9 s of the trusted process's CPU)
    import subprocess
    import sys

    code = ("import sys, torch\nfrom torch.testing import _comparison\nfrom torchgrade.engine.compare import compare\n"
            "before = getattr(_comparison, '_HAS_DTENSOR', None)\n"
            "try:\n    compare(torch.tensor([1.0]), torch.tensor([1.5]))\nexcept Exception as e:\n"
            "    assert type(e).__name__ == 'Mismatch', e\n"
            "compare(torch.tensor([1.0, float('nan')]), torch.tensor([1.0 + 1e-9, float('nan')]))\n"
            "assert getattr(_comparison, '_HAS_DTENSOR', None) == before\n"
            "print('torch.distributed.tensor' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
