"""The grading-fairness policy (exercises.md, "Fairness rules"): one test per rule, and the corpus.

1. Error checks accept the type the docs name and every type the matching PyTorch op raises there,
   worked out here by calling the op; "as <op> does" only where the op does raise.
2. Messages describe the student's code and values, never the probe's internals.
3. One claim per check: a mistake loses the checks about it, not those that merely share a setup.
4. The corpus (tests/fairness/): correct submissions unlike the reference score full marks, and
   each realistic mistake loses exactly its own checks.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from torchgrade.engine.scoring import Grade

with warnings.catch_warnings():  # the checks' `target` mark is registered by the grading plugin, not here
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    from graders.checks.hidden import test_conv as hidden_conv
    from graders.checks.hidden import test_tensors as hidden_tensors
    from graders.checks.visible import test_conv as visible_conv
    from graders.checks.visible import test_tensors as visible_tensors

from conftest import failures

CORPUS = Path(__file__).parent / "fairness"
MODULES = ("tensors", "autograd", "functions", "conv", "modules", "data", "training", "devices", "parallel")


def raised_by(op, *args, **kwargs) -> str | None:
    """The name of the exception type `op` raises for these arguments, or None when it returns."""
    try:
        op(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - which type is the question
        return type(e).__name__
    return None


# --- rule 1: exception types as PyTorch raises them ----------------------------------------------

@pytest.mark.parametrize("case", hidden_conv.POOL_ERRORS)
def test_pool2d_errors_accept_what_torch_pooling_raises(case):
    shape, pool_size, mode, stride, padding = hidden_conv.POOL_ERRORS[case]
    x = torch.ones(shape)
    op = F.max_pool2d if mode == "max" else F.avg_pool2d
    kind = raised_by(op, x if x.dim() < 2 else x[None], pool_size, stride, padding)
    assert kind is not None and kind in ("ValueError", *hidden_conv.POOL_ERROR_ACCEPT), (case, kind)


def test_pad2d_errors_accept_what_f_pad_raises():
    assert raised_by(F.pad, torch.ones(5), (1, 1, 1, 1)) in ("ValueError", *hidden_conv.PAD_ERROR_ACCEPT)
    # F.pad crops where the padding is negative: no check may demand an error there.
    assert raised_by(F.pad, torch.ones(3, 3), (-1, -1, 1, 1)) is None
    source = Path(hidden_conv.__file__).read_text()
    assert "negative-padding\": ((3, 3)" not in source


@pytest.mark.parametrize("case", hidden_conv.CORR2D_ERRORS)
def test_corr2d_errors_are_those_of_conv2d(case):
    x_shape, k_shape = hidden_conv.CORR2D_ERRORS[case]
    assert raised_by(F.conv2d, torch.ones(x_shape)[None, None], torch.ones(k_shape)[None, None]) == "RuntimeError"


@pytest.mark.parametrize("case", hidden_conv.MULTI_IN_ERRORS)
def test_corr2d_multi_in_says_as_conv2d_does_only_where_it_does(case):
    x_shape, k_shape, like = hidden_conv.MULTI_IN_ERRORS[case]
    kind = raised_by(F.conv2d, torch.ones(x_shape)[None], torch.ones(k_shape)[None])
    assert (kind == "RuntimeError") == (like == "F.conv2d"), (case, kind, like)


@pytest.mark.parametrize("case", hidden_conv.MULTI_IN_OUT_ERRORS)
def test_corr2d_multi_in_out_errors_are_those_of_conv2d(case):
    x_shape, k_shape = hidden_conv.MULTI_IN_OUT_ERRORS[case]
    assert raised_by(F.conv2d, torch.ones(x_shape), torch.ones(k_shape)) == "RuntimeError"


def test_tensors_errors_are_those_of_the_torch_ops():
    assert raised_by(torch.zeros(6).view, 4, 2) == "RuntimeError"
    assert raised_by(torch.broadcast_shapes, (3, 2), (4, 2)) == "RuntimeError"
    assert raised_by(torch.broadcast_shapes, (0,), (3,)) == "RuntimeError"
    for case, (build, shape) in hidden_tensors.VIEW_CASES.items():  # where view raises, Tensor.view does
        x = build(torch.arange(24.0, dtype=torch.float64))
        assert raised_by(x.view, *shape) in (None, "RuntimeError"), case
    index = torch.tensor([[0, 1], [3, 0]])
    assert raised_by(torch.zeros(3, 2).scatter_, 0, index, torch.ones(2, 2)) in ("RuntimeError", "IndexError")
    assert raised_by(torch.zeros(3).scatter_add_, 0, torch.tensor([0, 3]), torch.ones(2)) in ("RuntimeError",
                                                                                              "IndexError")
    assert raised_by(torch.gather, torch.zeros(2, 2), 1, torch.tensor([[0, 2]])) in ("RuntimeError", "IndexError")


@pytest.mark.parametrize("table, wrap", [
    (visible_conv.CORR2D_SHAPE_ERRORS, lambda x, k: (x[None, None], k[None, None])),
    (visible_conv.MULTI_IN_SHAPE_ERRORS, lambda x, k: (x[None], k[None])),
    (visible_conv.MULTI_IN_OUT_SHAPE_ERRORS, lambda x, k: (x, k)),
], ids=["corr2d", "corr2d_multi_in", "corr2d_multi_in_out"])
def test_visible_corr2d_errors_are_those_of_conv2d(table, wrap):
    for case, (x_shape, k_shape) in table.items():
        assert raised_by(F.conv2d, *wrap(torch.ones(x_shape), torch.ones(k_shape))) == "RuntimeError", case


@pytest.mark.parametrize("case", visible_conv.POOL_ARGUMENT_ERRORS)
def test_visible_pool2d_errors_accept_what_torch_pooling_raises(case):
    shape, pool_size, mode, stride, padding, accept = visible_conv.POOL_ARGUMENT_ERRORS[case]
    x = torch.ones(shape)
    op = F.max_pool2d if mode == "max" else F.avg_pool2d
    kind = raised_by(op, x if x.dim() < 2 else x[None], pool_size, stride, padding)
    assert kind is not None and kind in ("ValueError", *accept), (case, kind)


def test_visible_pad2d_errors_accept_what_f_pad_raises():
    for shape in [(5,), (), (0,)]:
        assert raised_by(F.pad, torch.ones(shape), (1, 1, 1, 1)) in ("ValueError", *visible_conv.PAD_SHAPE_ERROR_ACCEPT)


def _tensors_error_cases():
    """(op, target, table, case) for each error table of the visible tensors checks."""
    tables = {"view": (lambda x, *shape: x.view(*shape), visible_tensors.VIEW_ERRORS),
              "broadcast_to": (torch.broadcast_to, visible_tensors.BROADCAST_TO_ERRORS),
              "scatter_": (lambda t, *a: t.scatter_(*a), visible_tensors.SCATTER_ERRORS),
              "scatter_add_": (lambda t, *a: t.scatter_add_(*a), visible_tensors.SCATTER_ERRORS),
              "gather": (torch.gather, visible_tensors.GATHER_ERRORS),
              "one_hot": (F.one_hot, visible_tensors.ONE_HOT_ERRORS),
              "broadcast_shape": (torch.broadcast_shapes, {  # its table holds the shapes themselves
                  case: (lambda _device, shapes=shapes: shapes, accept)
                  for case, (shapes, accept) in visible_tensors.BROADCAST_SHAPE_ERRORS.items()})}
    return [(name, op, table, case) for name, (op, table) in tables.items() for case in table]


@pytest.mark.parametrize("name, op, table, case", _tensors_error_cases(),
                         ids=[f"{n}-{c}" for n, _, _, c in _tensors_error_cases()])
def test_tensors_error_tables_accept_what_the_torch_op_raises(name, op, table, case):
    """Each visible error check accepts the reference's type and what PyTorch raises for the same input."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("reference_tensors", CHECKS.parent.parent / "reference" / "tensors.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    build, accept = table[case]
    torch_kind = raised_by(op, *build("cpu"))
    reference_kind = raised_by(getattr(reference, name), *build("cpu"))
    assert torch_kind is not None and reference_kind is not None, (case, torch_kind, reference_kind)
    assert torch_kind in (reference_kind, *accept), (case, torch_kind, reference_kind, accept)


def test_vjp_error_is_that_of_backward():
    x = torch.ones(4, requires_grad=True)
    assert raised_by(torch.sin(x).backward, torch.ones(5)) == "RuntimeError"


CHECKS = Path(__file__).resolve().parent.parent / "graders" / "checks"


def test_as_pytorch_does_is_said_only_where_a_check_names_the_op():
    """No check of an error without a PyTorch counterpart names an op (accumulated_grad, conv_output_size,
    shard, the mode of pool2d), and the engine's own words never claim PyTorch on their own."""
    from torchgrade.engine.i18n import MESSAGES
    assert all("PyTorch" not in m["en"] for key, m in MESSAGES.items() if key.startswith("not_raised"))
    for path in CHECKS.glob("*/test_*.py"):
        tree = ast.parse(path.read_text())
        for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:
            target = next((d.args[0].value for d in fn.decorator_list if isinstance(d, ast.Call)
                           and getattr(d.func, "attr", "") == "target"), None)
            likes = [k for n in ast.walk(fn) if isinstance(n, ast.Call) for k in n.keywords if k.arg == "like"]
            if target in ("accumulated_grad", "conv_output_size", "shard") or fn.name.endswith("for_the_mode_mean"):
                assert not likes, f"{path.name}::{fn.name} says 'as ... does' where no PyTorch op raises"


# --- the corpus ----------------------------------------------------------------------------------

def _expectation(path: Path) -> dict[str, list[str]]:
    first = path.read_text().splitlines()[0]
    if first.strip() == "# expect: full marks":
        return {}
    found = re.fullmatch(r"# expect: loses (\{.*\})", first.strip())
    assert found, f"{path}: the first line must be '# expect: full marks' or '# expect: loses {{...}}'"
    return ast.literal_eval(found.group(1))


def check_id(nodeid: str) -> str:
    """``hidden/test_conv.py::test_x[case-cpu]`` -> ``test_x[case]``: the check without its device."""
    name = nodeid.split("::")[-1]
    found = re.fullmatch(r"(\w+)(?:\[(.*)\])?", name)
    inner = re.sub(r"(^|-)(cpu|cuda)(?=-|$)", "", found.group(2) or "").strip("-")
    return f"{found.group(1)}[{inner}]" if inner else found.group(1)


def lost_checks(grade: Grade, device: str | None = None) -> dict[str, list[str]]:
    """{target: sorted check ids that did not pass} (on `device` only, when given)."""
    lost: dict[str, set[str]] = {}
    for t in grade.tests:
        if t.status in ("failed", "error") and device in (None, t.device):
            lost.setdefault(t.target, set()).add(check_id(t.nodeid))
    return {k: sorted(v) for k, v in lost.items()}


ENTRIES = sorted(CORPUS.glob("*/*.py"))


def test_every_module_has_correct_and_mistaken_submissions():
    for module in MODULES:
        kinds = {bool(_expectation(p)) for p in CORPUS.glob(f"{module}/*.py")}
        assert kinds == {False, True}, f"tests/fairness/{module}/ needs a full-marks and a mistaken submission"


def _message_lines(path: Path, tag: str) -> list[str]:
    return [line[len(tag):].strip() for line in path.read_text().splitlines() if line.startswith(tag)]


@pytest.mark.parametrize("path", ENTRIES, ids=[f"{p.parent.name}/{p.stem}" for p in ENTRIES])
def test_corpus_submission_scores_as_asserted(grade, path):
    """Rules 3 and 4: the submission loses exactly the checks its first line names; rule 2: every
    ``# message:`` line is in some failure message, no ``# never:`` line in any.

    Graded on every device: on CUDA, or without it on the CUDA stand-in, a submission loses no CUDA
    check beyond those its lines name (no false alarm of the stand-in)."""
    module = path.parent.name
    g = grade(only=(module,), append={module: path.read_text()}, device="all")
    expected = {k: sorted(v) for k, v in _expectation(path).items()}
    lost = lost_checks(Grade(g.submission, [t for t in g.tests if t.device != "cuda"]))
    messages = {t.target: t.output for t in g.tests if t.status in ("failed", "error")}
    assert lost == expected, {k: messages.get(k, "")[:600] for k in set(lost) | set(expected)}
    on_cuda = _cuda_expectation(path) or {}
    allowed = {k: set(expected.get(k, ())) | set(on_cuda.get(k, ())) for k in set(expected) | set(on_cuda)}
    extra = {k: sorted(set(v) - allowed.get(k, set())) for k, v in lost_checks(g, "cuda").items()}
    assert not any(extra.values()), {k: (v, messages.get(k, "")[:600]) for k, v in extra.items() if v}
    if not expected and not (on_cuda and any(t.device == "cuda" and t.status != "skipped" for t in g.tests)):
        assert g.score == g.max_score > 0
    outputs = [t.output for t in g.tests if t.status in ("failed", "error")]
    for text in _message_lines(path, "# message:"):
        assert any(text in out for out in outputs), (text, outputs[:2])
    assert_never_said(outputs, _message_lines(path, "# never:") + NEVER_IN_A_MESSAGE)


def assert_never_said(outputs: list[str], words: list[str]) -> None:
    """Rule 2: none of these words in any failure message."""
    for text in words:
        assert not any(text in out for out in outputs), (text, [o for o in outputs if text in o][:1])


def _cuda_expectation(path: Path) -> dict[str, list[str]] | None:
    """The ``# on cuda: loses {...}`` line of a submission whose mistake shows only on CUDA, or None."""
    for line in path.read_text().splitlines()[1:3]:
        found = re.fullmatch(r"# on cuda: loses (\{.*\})", line.strip())
        if found:
            return ast.literal_eval(found.group(1))
    return None


CUDA_ENTRIES = [p for p in ENTRIES if _cuda_expectation(p) is not None]


def test_the_corpus_has_mistakes_that_show_only_on_cuda():
    """Each is right on the CPU (the test above holds it to full marks there) and wrong on CUDA."""
    assert {p.parent.name for p in CUDA_ENTRIES} >= {"tensors", "conv", "functions"}
    assert all(_expectation(p) == {} for p in CUDA_ENTRIES)


@pytest.mark.parametrize("path", CUDA_ENTRIES, ids=[f"{p.parent.name}/{p.stem}" for p in CUDA_ENTRIES])
def test_a_cuda_mistake_loses_exactly_its_cuda_checks(grade, path):
    """Graded on every device, the mistake costs the CUDA variants its line names and nothing on the CPU:
    on a GPU, and on a machine without one on the CUDA stand-in (the bundled course's cuda_standin:
    score), with a message that names the student's line and says to pass the device."""
    module = path.parent.name
    g = grade(only=(module,), append={module: path.read_text()}, device="all")
    assert g.standin == ("" if torch.cuda.is_available() else "score")
    on = {device: lost_checks(g, device) for device in ("cpu", "cuda")}
    messages = {t.target: t.output for t in g.tests if t.status in ("failed", "error")}
    assert on["cpu"] == {}, on["cpu"]
    expected = {k: sorted(v) for k, v in _cuda_expectation(path).items()}
    assert on["cuda"] == expected, {k: messages.get(k, "")[:600] for k in set(on["cuda"]) | set(expected)}
    assert_never_said([t.output for t in g.tests if t.status in ("failed", "error")], NEVER_IN_A_MESSAGE)
    if not torch.cuda.is_available():
        for t in g.tests:
            if t.status in ("failed", "error"):
                assert t.standin and "device=x.device" in t.output and f"{module}.py, line " in t.output, t.output
                assert "found without a GPU, by the CUDA stand-in" in t.output


#: Words of the probes' internals that no failure message may show (rule 2).
NEVER_IN_A_MESSAGE = ["course_probes", "returned a dict", "missing []", "unexpected []",
                      "Can't access the shape of an uninitialized parameter"]


# --- rule 2: what a probe reports about a student's code, in the student's terms ------------------

@pytest.fixture
def course_probes():
    from torchgrade.sandbox.probes import load_course
    load_course(Path(__file__).resolve().parent.parent / "graders" / "probes")


def _run(probe_name, obj, name, args, options=None):
    from torchgrade.sandbox.probes import Target, run_probe
    return run_probe(probe_name, Target(obj, name), tuple(args), {}, options or {})["value"]


def test_a_failed_gradcheck_names_its_first_wrong_entry_whole(course_probes):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x * grad  # should be 2 * x * grad

    x = torch.linspace(0.5, 2.0, 12, dtype=torch.float64).reshape(3, 4)
    verdict = _run("function_gradcheck", Square, "Square", [x])["gradcheck"]
    found = re.search(r"12 of 144 entries differ; d\(out\[0\]\)/d\(in\[0\]\) is (\S+) by your backward, "
                      r"(\S+) by finite differences$", verdict)
    assert found, verdict
    assert float(found.group(1)) == pytest.approx(1.5, abs=1e-3) and float(found.group(2)) == pytest.approx(1.0, abs=1e-3)
    assert len(verdict) < 200  # shown whole under a value mismatch


def test_a_lazy_module_is_described_by_its_submodules_not_a_crash(course_probes):
    class LazyMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden, self.act, self.output = torch.nn.LazyLinear(3), torch.nn.ReLU(), torch.nn.LazyLinear(2)

        def forward(self, x):
            return self.output(self.act(self.hidden(x)))

    facts = _run("module_facts", LazyMLP, "MLP", [], {"inputs": (torch.ones(2, 4, dtype=torch.float64),)})
    assert facts["submodules"] == ["hidden: LazyLinear", "act: ReLU", "output: LazyLinear"]
    assert all(shape.startswith("uninitialized") for shape in facts["parameters"].values())


# --- rule 3: one claim per check -------------------------------------------------------------------

@pytest.mark.parametrize("entry", ["autograd/textbook_sgd_that_trips_over_a_missing_gradient",
                                   "parallel/returns_the_local_loss",
                                   "autograd/accumulated_grad_without_the_steps_check"])
def test_a_mistake_about_one_claim_loses_one_check(entry):
    """The corpus grades these (test_corpus_submission_scores_as_asserted); here: each is asserted
    to lose a single check, the one about its mistake, not every check sharing its setup."""
    expected = _expectation(CORPUS / f"{entry}.py")
    assert sum(len(v) for v in expected.values()) == 1, expected
