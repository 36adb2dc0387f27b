"""The audit's search for marked mutants (torchgrade/authoring/verification.py): functions of its own for a target that
takes a callable, where the checks name theirs for a probe."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from torchgrade.authoring import verification
from torchgrade.sandbox import wire

ROOT = Path(__file__).resolve().parent.parent

REFERENCE = '''\
from typing import Callable

import torch


def grad_of(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The gradient of ``f(x).sum()`` at ``x``; zeros where it does not depend on ``x``."""
    x_ = x.detach().clone().requires_grad_(True)
    y = f(x_)
    if not y.requires_grad:
        return torch.zeros_like(x_)
    y.sum().backward()
    if x_.grad is None:
        return torch.zeros_like(x_)
    return x_.grad
'''


def _verdict(tmp_path: Path, name: str, reference: str, mutant: str, sent: list[dict]) -> verification.Verdict:
    """The search's verdict on one mutant of `calc.name` (module source `reference`), given what its checks sent."""
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "calc.py").write_text(reference)
    (tmp_path / "mutant.py").write_text(mutant)
    requests = tmp_path / "requests"
    requests.mkdir()
    (requests / f"calc.{name}.req").write_bytes(wire.encode([wire.encode(r) for r in sent]))
    assignment = SimpleNamespace(probes_dir=ROOT / "graders" / "probes", reference_dir=tmp_path / "reference")
    found = verification.verify(assignment, {f"calc.{name}": [("m1", str(tmp_path / "mutant.py"), {})]}, requests,
                                tmp_path, seed=0)
    return found[(f"calc.{name}", "m1")]


def test_a_mark_on_a_target_that_takes_a_function_is_tried_with_functions_that_close_over_a_parameter(tmp_path):
    """`if x_.grad is None` removed looks equivalent on every function the checks name (each reads its input, so
    backward always gives x_ a .grad); a function constant in x that closes over a parameter requiring grad
    shows the mutant returning None where the reference returns zeros."""
    # what a check sends: the bundled course's autograd probe, a function named for it
    sent = [{"probe": "autograd_call", "args": ["sin", torch.linspace(-1, 1, 3)], "kwargs": {}, "options": {}},
            {"probe": "autograd_call", "args": ["cube", torch.linspace(-1, 1, 4)], "kwargs": {}, "options": {}}]
    verdict = _verdict(tmp_path, "grad_of", REFERENCE,
                       REFERENCE.replace("    if x_.grad is None:\n        return torch.zeros_like(x_)\n", ""), sent)
    assert verdict.status == "differs", verdict
    assert "grad_of(lambda t: w * torch.ones_like(t) (w = torch.tensor(1.5, requires_grad=True)), tensor(float32" \
           in verdict.evidence
    assert "a function constant in the input, through a parameter that requires grad" in verdict.evidence
    # the checks' own requests and the generated ones, without the functions: nothing tells it apart
    plain = verification.plan(sent, 0, "calc.grad_of")
    assert not any(" a function " in what for what, _ in plain)
    assert len(verification.plan(sent, 0, "calc.grad_of", callables=(0,))) == len(plain) + 2 * len(verification.FUNCTIONS)


def test_only_parameters_annotated_as_callables_get_functions():
    namespace: dict = {}
    exec(textwrap.dedent('''\
        from __future__ import annotations
        from typing import Callable
        import collections.abc

        def one(x, f: Callable[[int], int], g: collections.abc.Callable, n: int = 1): ...
        def none(x, name: str): ...
    '''), namespace)
    assert verification.callable_positions(namespace["one"]) == (1, 2)
    assert verification.callable_positions(namespace["none"]) == ()
    assert verification.callable_positions(len) == ()


COUNT = '''\
import operator

import torch


def count_to(n: int) -> torch.Tensor:
    """``torch.arange(n)``: int64, for an int ``n``."""
    n = operator.index(n)
    return torch.arange(n)
'''


def test_a_mark_on_a_dropped_operator_index_is_tried_with_the_float_of_each_int(tmp_path):
    """Dropping `operator.index` looks equivalent on every int the checks or their variations send; the float of
    the same int shows the mutant returning a float tensor where the reference raises TypeError."""
    sent = [{"probe": "call", "args": [3], "kwargs": {}, "options": {}}]
    verdict = _verdict(tmp_path, "count_to", COUNT, COUNT.replace("    n = operator.index(n)\n", ""), sent)
    assert verdict.status == "differs", verdict
    assert "count_to(3.0)" in verdict.evidence and "TypeError" in verdict.evidence, verdict.evidence
    assert [what for what, _ in verification.variations(sent[0]) if "(a float)" in what] == ["argument 0 = 3.0 (a float)"]


def test_the_search_adds_empty_inference_mode_default_dtype_and_list_inputs_and_reads_excludes():
    """The inputs an outside auditor's found the search lacked, and the predicate of an outside-the-contract
    mark: over the target's parameters by name, the exceptions raised and where the two differ."""
    import torch

    def pad(X, padding, value=0.0):
        return X

    request = {"probe": "call", "args": [torch.ones(2, 3), (1, 2)], "kwargs": {}, "options": {}}
    made = dict(verification.variations(request))
    assert tuple(made["argument 0 empty, shape (0,)"]["args"][0].shape) == (0,)
    assert made["argument 1 a list, not a tuple"]["args"][1] == [1, 2]
    inference = made["argument 0 made under torch.inference_mode()"]
    fresh = verification._fresh(inference)
    assert fresh["args"][0].is_inference() and not request["args"][0].is_inference()
    assert "made under torch.inference_mode()" in verification.describe_request("pad", inference)
    dtype = made["under default dtype float64"]
    assert verification.observe(lambda: torch.zeros(1).dtype, "f", dict(dtype, args=[], probe="call"))["result"] \
        == torch.float64 and torch.get_default_dtype() == torch.float32
    negative = dict(request, args=[torch.ones(2, 3), (-1, 2)])
    assert verification.excluded("any(p < 0 for p in padding) and value == 0", pad, negative)
    assert not verification.excluded("any(p < 0 for p in padding)", pad, request)
    assert not verification.excluded("no_such_name", pad, negative)  # raises: not excluded
    assert verification.excluded("raised == ('ValueError', 'RuntimeError')", pad, request, ("ValueError", "RuntimeError"))
    assert verification.excluded("difference.startswith('.result.stride')", pad, request, found=".result.stride: (1, 2)")
    assert verification.parse_input("pad(torch.ones(5), 1)", "pad").args
    with pytest.raises(ValueError, match="expected one call of pad"):
        verification.parse_input("other(torch.ones(5))", "pad")
