"""The CUDA stand-in (torchgrade/sandbox/standin.py): CUDA's placement rules without a GPU, and the policy.

The rules are asserted here one by one, each with what a GPU does (torch's own messages); the
corpus's CUDA-only mistakes are graded on it in tests/test_fairness.py, the reference in
tests/test_engine.py.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from torchgrade.engine.config import ConfigError, load_assignment
from torchgrade.engine.grading import grade_submission
from torchgrade.engine.results import read_grade, results_document
from torchgrade.sandbox import standin, wire
from torchgrade.sandbox.probes import Target, run_probe

from conftest import ROOT, make_submission

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="the stand-in stands in only where CUDA is absent")


def on_gpu(fn):
    """Run `fn` with the stand-in on; return its result, or the exception it raised."""
    with standin.active():
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - which exception is the question
            return e


# --- placement, as on a GPU -------------------------------------------------------------------

def test_device_cuda_makes_stand_in_tensors_that_say_cuda_and_hold_values():
    x = on_gpu(lambda: torch.arange(6.0, device="cuda"))
    assert type(x) is standin.StandIn and x.device == torch.device("cuda", 0) and x.is_cuda
    assert standin.plain(x).tolist() == [0, 1, 2, 3, 4, 5]
    assert on_gpu(lambda: int(torch.tensor([3, 1, 2], device="cuda").max())) == 3  # data-dependent code works
    assert on_gpu(lambda: torch.tensor([1, 2]).cuda().device) == torch.device("cuda", 0)
    assert on_gpu(lambda: torch.zeros(2, device=torch.ones(1, device="cuda").device).is_cuda)


def test_a_cpu_tensor_mixed_with_cuda_inputs_raises_as_on_a_gpu():
    error = on_gpu(lambda: torch.ones(3, device="cuda") + torch.zeros(3))
    assert type(error) is RuntimeError and "Expected all tensors to be on the same device" in str(error)
    error = on_gpu(lambda: torch.nn.Linear(2, 3)(torch.ones(4, 2, device="cuda")))  # weights left on the CPU
    assert type(error) is RuntimeError
    error = on_gpu(lambda: torch.cat([torch.ones(2, device="cuda"), torch.ones(2)]))
    assert type(error) is RuntimeError


def test_tensors_in_lists_tuples_and_keyword_arguments_are_placed_and_given_their_values():
    """The operator path finds tensors at any depth of an operator's arguments (lists, tuples, out=) and
    leaves the rest (a torch.Size, numbers) as they are."""
    def nested():
        a = torch.arange(6.0, device="cuda")
        stacked = torch.stack((a, a * 2))
        joined = torch.cat([a[:2], stacked.flatten()[:1]], dim=0)
        out = torch.empty(6, device="cuda")
        written = torch.add(a, 1, out=out)
        return stacked, joined, written is out, out, a.view(torch.Size([2, 3])).new_zeros(torch.Size([1, 2]))
    stacked, joined, same, out, zeros = on_gpu(nested)
    assert all(type(t) is standin.StandIn for t in (stacked, joined, out, zeros)) and same
    assert standin.plain(stacked).tolist() == [[0, 1, 2, 3, 4, 5], [0, 2, 4, 6, 8, 10]]
    assert standin.plain(joined).tolist() == [0, 1, 0] and standin.plain(out).tolist() == [1, 2, 3, 4, 5, 6]
    assert zeros.shape == (1, 2)
    error = on_gpu(lambda: torch.add(torch.ones(3, device="cuda"), 1, out=torch.empty(3)))  # out= on the CPU
    assert type(error) is RuntimeError and "Expected all tensors to be on the same device" in str(error)


def test_cpu_scalars_mix_with_cuda_tensors_as_on_a_gpu_but_are_never_written():
    """0-d CPU tensors (Python numbers, torch.tensor(2.0)) are inputs CUDA kernels take; not outputs."""
    assert on_gpu(lambda: (torch.ones(3, device="cuda") * torch.tensor(2.0)).is_cuda)
    assert on_gpu(lambda: torch.where(torch.ones(2, device="cuda") > 0, torch.ones(2, device="cuda"),
                                      torch.tensor(0.0)).is_cuda)
    assert type(on_gpu(lambda: torch.tensor(1.0).add_(torch.ones((), device="cuda")))) is RuntimeError


def test_copies_and_moves_cross_devices_and_to_the_same_device_is_no_copy():
    def copy_in():
        y = torch.zeros(2, 2)
        y[0, 0] = torch.ones((), device="cuda")  # y stays on the CPU, as on a GPU
        return y
    y = on_gpu(copy_in)
    assert type(y) is torch.Tensor and y[0, 0] == 1

    def moves():
        x = torch.ones(2, device="cuda")
        return x.to("cuda") is x, x.cuda() is x, type(x.cpu()), x.to(torch.float64).is_cuda
    assert on_gpu(moves) == (True, True, torch.Tensor, True)


def test_new_tensor_of_a_cuda_tensor_is_on_cuda_as_on_a_gpu():
    """Found by the differential test (tests/test_cudastandin.py): it used to make a meta tensor."""
    made = on_gpu(lambda: torch.ones(2, device="cuda").new_tensor([3.0]))
    assert type(made) is standin.StandIn and made.device == torch.device("cuda", 0)
    assert standin.plain(made).tolist() == [3.0]


def test_indexing_takes_cpu_indices_for_cuda_tensors_not_the_other_way():
    assert on_gpu(lambda: torch.arange(4.0, device="cuda")[torch.tensor([0, 2])].is_cuda)
    error = on_gpu(lambda: torch.zeros(3).index_put_((torch.tensor([0], device="cuda"),), torch.tensor(1.0)))
    assert type(error) is RuntimeError and "indices should be either on cpu" in str(error)


def test_numpy_of_a_cuda_tensor_raises_type_error_as_torch_does():
    error = on_gpu(lambda: torch.ones(2, device="cuda").numpy())
    assert type(error) is TypeError and "Use Tensor.cpu()" in str(error)
    assert type(on_gpu(lambda: np.asarray(torch.ones(2, device="cuda")))) is TypeError
    assert on_gpu(lambda: torch.ones(2, device="cuda").cpu().numpy().tolist()) == [1.0, 1.0]


def test_autograd_runs_on_stand_in_tensors_including_a_custom_backward():
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x ** 2 - torch.zeros(x.shape, dtype=x.dtype)  # a CPU tensor, inside backward

    def run(shape):
        x = torch.full(shape, 2.0, dtype=torch.float64, device="cuda", requires_grad=True)
        Cube.apply(x).sum().backward()
        return x.grad

    assert type(on_gpu(lambda: run((3,)))) is RuntimeError  # as on a GPU: the CPU zeros meet grad there
    grad = on_gpu(lambda: run(()))  # a 0-d CPU tensor mixes legally
    assert grad.is_cuda and float(grad) == 12.0
    assert on_gpu(lambda: torch.autograd.gradcheck(
        torch.sin, torch.rand(3, dtype=torch.float64, device="cuda", requires_grad=True)))


def test_modules_move_deep_copy_and_train_on_the_stand_in():
    def train():
        model = copy.deepcopy(torch.nn.Linear(2, 1).to("cuda"))
        loss = model(torch.ones(4, 2, device="cuda")).pow(2).sum()
        loss.backward()
        return model.weight.is_cuda, model.weight.grad.is_cuda, f"{loss:.1f}" != ""
    assert on_gpu(train) == (True, True, True)


@pytest.mark.parametrize("move", [
    "m.to('cuda'); m.to(torch.float64)", "m.to(torch.float64); m.to('cuda')", "m.to('cuda', torch.float64)",
    "m.to('cuda'); m.double()", "m.cuda(); m.to(dtype=torch.float64)", "m.to(torch.zeros(1, dtype=torch.float64, device='cuda'))",
    "m.to('cuda', non_blocking=True); m.to(torch.float64, non_blocking=True)", "m.to('cuda'); m.half()"])
def test_every_to_form_moves_and_converts_a_module_as_on_a_gpu(move):
    """The parameters compute in the dtype they report, whatever the order of device and dtype: a stand-in
    that kept float32 values behind a float64 parameter made the reference raise "mat1 and mat2 must have
    the same dtype", and a check that every submission passed the same way."""
    def run():
        m = torch.nn.Linear(3, 2)
        exec(move)
        x = torch.ones(4, 3, dtype=m.weight.dtype, device="cuda")
        y = m(x)
        y.float().sum().backward()
        return (m.weight.is_cuda, m.weight.dtype, standin.plain(m.weight).dtype, y.dtype, standin.plain(y).dtype,
                m.weight.grad.dtype, standin.plain(m.weight.grad).dtype)
    got = on_gpu(run)
    assert not isinstance(got, Exception), got
    dtype = torch.float16 if "half" in move else torch.float64
    assert got == (True,) + (dtype,) * 6


def test_data_assigned_across_devices_is_set_aside_not_scored():
    with standin.active() as unsupported:
        p = torch.nn.Parameter(torch.zeros(2, device="cuda"))
        with pytest.raises(standin.Unsupported):
            p.data = torch.ones(2)  # a GPU moves the parameter to the CPU: not modelled
    assert unsupported and ".data =" in unsupported[0]


def test_a_loader_iterated_under_inference_mode_works_as_on_a_gpu():
    """A view of a normal tensor made under inference_mode is a normal tensor (the stand-in made it an
    inference tensor, and torch raised "Cannot set version_counter for inference tensor" where a GPU does not)."""
    def evaluate():
        model = torch.nn.Linear(3, 2).to("cuda")
        x, y = torch.ones(5, 3, device="cuda"), torch.zeros(5, dtype=torch.long, device="cuda")
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=2)
        with torch.inference_mode():
            hits = sum(int((model(a).argmax(1) == b).sum()) for a, b in loader)
            inner = x[0].is_inference(), (x * 2).is_inference(), (x * 2)[0].is_inference()
        return hits >= 0, inner
    cpu_x = torch.ones(5, 3)
    with torch.inference_mode():
        on_cpu = cpu_x[0].is_inference(), (cpu_x * 2).is_inference(), (cpu_x * 2)[0].is_inference()
    assert on_gpu(evaluate) == (True, on_cpu)


def test_in_place_shape_changes_follow_and_what_cannot_be_modelled_is_recorded():
    with standin.active() as unsupported:
        x = torch.ones(2, 1, 3, device="cuda")
        x.squeeze_(1)
        assert x.shape == (2, 3) and (x + 1).shape == (2, 3)
        with pytest.raises(standin.Unsupported):
            torch.ones(2, device="cuda").resize_(10)  # growing a storage: not modelled
    assert unsupported and "resize_" in unsupported[0]


def test_a_probe_on_the_stand_in_reports_what_it_cannot_model_instead_of_a_result():
    outcome = run_probe("call", Target(lambda x: x.resize_(10), "grow"), (standin.to_standin(torch.ones(2)),), {}, {},
                        on_standin=True)
    assert "standin_unsupported" in outcome and "value" not in outcome
    assert run_probe("ddp_train", Target(None, "step"), (), {}, {}, on_standin=True)["standin_unsupported"] \
        .startswith("the data-parallel ranks run in processes of their own")


def test_stand_in_tensors_cross_the_wire_as_cuda_tensors():
    with standin.active():
        x = torch.arange(6.0, device="cuda").view(2, 3)
        frame = wire.encode({"x": x, "t": x.t(), "cpu": torch.ones(2)})
    if torch.cuda.is_available():
        return
    back = wire.decode(frame)
    assert type(back["x"]) is standin.StandIn and str(back["x"].device) == "cuda:0"
    assert standin.plain(back["t"]).untyped_storage().data_ptr() == standin.plain(back["x"]).untyped_storage().data_ptr()
    assert type(back["cpu"]) is torch.Tensor


# --- the policy -------------------------------------------------------------------------------

def test_the_bundled_course_costs_points_for_stand_in_findings():
    assert load_assignment(ROOT / "assignment.yaml").cuda_standin == "score"


def test_cuda_standin_accepts_score_warn_off_only(tmp_path):
    text = (ROOT / "assignment.yaml").read_text().replace("cuda_standin: score", "cuda_standin: always")
    (tmp_path / "assignment.yaml").write_text(text)
    with pytest.raises(ConfigError, match="cuda_standin: expected one of score, warn, off, got 'always'"):
        load_assignment(tmp_path / "assignment.yaml")


ONE_HOT_ON_THE_CPU = (ROOT / "tests" / "fairness" / "tensors" / "one_hot_zeros_on_the_cpu.py").read_text()


def _one_hot_mistake(tmp_path, assignment, policy, monkeypatch):
    monkeypatch.setenv("TORCHGRADE_CUDA_STANDIN", policy)
    folder = make_submission(tmp_path / policy, append={"tensors": ONE_HOT_ON_THE_CPU})
    return grade_submission(folder, assignment, device="all", only=("tensors.one_hot",))


@needs_no_cuda
def test_score_costs_the_cuda_checks_and_says_the_stand_in_graded_them(tmp_path, assignment, monkeypatch):
    g = _one_hot_mistake(tmp_path, assignment, "score", monkeypatch)
    cuda = [t for t in g.tests if t.device == "cuda"]
    assert all(t.standin for t in cuda) and not any(t.standin for t in g.tests if t.device == "cpu")
    assert g.standin == "score" and g.devices == ["cpu"] and g.score < g.max_score
    lost = [t for t in cuda if t.status == "failed"]
    assert lost and all("device=x.device" in t.output and "found without a GPU" in t.output for t in lost)
    document = results_document(g, assignment)
    assert document["extra_data"]["cuda_standin"] == "score"
    assert all(test["extra_data"].get("standin") for test in document["tests"] if "[cuda]" in test["name"])
    assert read_grade(document).standin == "score"
    assert "CUDA checks: graded on the CUDA stand-in" in g.output


@needs_no_cuda
def test_warn_shows_the_findings_and_costs_nothing(tmp_path, assignment, monkeypatch):
    g = _one_hot_mistake(tmp_path, assignment, "warn", monkeypatch)
    cuda = [t for t in g.tests if t.device == "cuda"]
    assert cuda and all(t.status == "skipped" and t.max_score == 0 for t in cuda)
    assert any(t.output.startswith("warning only") and "device=x.device" in t.output for t in cuda)
    assert g.score == g.max_score == assignment.target("tensors", "one_hot").points and g.standin == "warn"


@needs_no_cuda
def test_off_sets_the_cuda_checks_aside_as_before(tmp_path, assignment, monkeypatch):
    g = _one_hot_mistake(tmp_path, assignment, "off", monkeypatch)
    cuda = [t for t in g.tests if t.device == "cuda"]
    assert cuda and all(t.status == "skipped" and "CUDA is not available" in t.output for t in cuda)
    assert g.score == g.max_score and g.standin == "" and not any(t.standin for t in g.tests)


def test_the_sandbox_says_when_code_calls_torch_cuda_itself():
    """torch.cuda.synchronize() works on a GPU; the stand-in does not model torch.cuda's API: the reply says so."""
    outcome = run_probe("call", Target(lambda x: torch.cuda.synchronize() or x, "sync"),
                        (standin.to_standin(torch.ones(2)),), {}, {}, on_standin=True)
    if not torch.cuda.is_available():
        assert outcome == {"standin_unsupported": standin.CALLS_CUDA}


@needs_no_cuda
def test_the_portable_backend_grades_on_the_stand_in_too(tmp_path, assignment, monkeypatch):
    monkeypatch.setenv("TORCHGRADE_ISOLATION", "process")
    g = _one_hot_mistake(tmp_path, assignment, "score", monkeypatch)
    assert g.isolation == "process"
    lost = {t.nodeid.split("::")[-1] for t in g.tests if t.status == "failed"}
    assert lost == {"test_encodes_labels_as_int64_rows[cuda]", "test_infers_the_number_of_classes_when_given_minus_one[cuda]",
                    "test_keeps_the_shape_of_2d_labels[cuda]", "test_encodes_a_zero_dim_label_as_one_row[cuda]",
                    "test_infers_the_number_of_classes_from_minus_one_as_in_the_docstring[cuda]",
                    "test_gives_an_empty_result_for_empty_labels[cuda]", "test_leaves_the_labels_unchanged[cuda]"}


@needs_no_cuda
def test_only_the_trusted_side_sets_a_check_aside_not_the_students_reply(tmp_path, assignment, monkeypatch):
    """one_hot calls torch.cuda.synchronize(): its reply says the stand-in cannot model that, but the reference
    ran on the stand-in, so those CUDA checks fail with the reason (a reply deciding what counts would let
    a submission move its points to the checks it passes); its CPU checks pass."""
    monkeypatch.setenv("TORCHGRADE_CUDA_STANDIN", "score")
    synchronizing = """
_correct_one_hot = one_hot


def one_hot(labels, num_classes=-1):
    if labels.device.type == "cuda":
        torch.cuda.synchronize()
    return _correct_one_hot(labels, num_classes)
"""
    folder = make_submission(tmp_path / "sync", append={"tensors": synchronizing})
    g = grade_submission(folder, assignment, device="all", only=("tensors.one_hot",))
    cuda = [t for t in g.tests if t.device == "cuda"]
    assert cuda and all(t.status == "failed" and "torch.cuda itself" in t.output for t in cuda), \
        [(t.name, t.status, t.output[:200]) for t in cuda]
    assert all(t.status == "passed" for t in g.tests if t.device == "cpu")
