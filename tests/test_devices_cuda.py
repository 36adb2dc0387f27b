"""Device-generic grading: a result must come back on its input's device, DDP ranks choose their
device and backend, and CUDA variants are skipped with the reason where there is no CUDA.

This machine may have no GPU, so the meta device stands in for CUDA where a test needs a second
device: like CUDA it is not the CPU, and unlike CUDA it exists everywhere.
"""


import pytest
import torch

from torchgrade.engine import compare
from torchgrade.engine.grading import grade_submission
from torchgrade.sandbox.probes import parallel as ddp

from conftest import ROOT


def test_a_result_silently_on_the_cpu_fails_saying_so():
    """The comparison every check ends in, with meta standing in for CUDA (the sandbox refuses to send
    meta tensors, so this is as far as a machine without CUDA can take it)."""
    with pytest.raises(compare.Mismatch, match="expected it on meta, got it on cpu"):
        compare.compare({"value": torch.ones(3, device="meta")}, {"value": torch.ones(3)})


@pytest.mark.parametrize("device, rank, gpus, nccl, expected", [
    ("cpu", 1, 0, True, ("cpu", "gloo")),
    ("cuda", 0, 1, True, ("cuda:0", "gloo")),  # two ranks on one GPU: NCCL refuses, gloo works
    ("cuda", 1, 1, True, ("cuda:0", "gloo")),
    ("cuda", 1, 2, True, ("cuda:1", "nccl")),  # a GPU per rank: NCCL
    ("cuda", 1, 2, False, ("cuda:0", "gloo")),  # a build without NCCL
])
def test_ddp_ranks_use_nccl_only_when_each_has_a_gpu_of_its_own(device, rank, gpus, nccl, expected):
    placed, backend = ddp.placement(device, rank, gpus, nccl)
    assert (str(placed), backend) == expected


def test_ddp_ranks_are_forked_on_the_cpu_and_come_from_a_fork_server_for_cuda(monkeypatch):
    """A process that has initialised CUDA cannot fork children that use it."""
    monkeypatch.setattr(ddp, "gpu_present", lambda: False)
    assert ddp.start_method("cpu") == "fork"
    assert ddp.start_method("cuda") == "forkserver"


def test_ddp_ranks_come_from_the_fork_server_on_the_cpu_too_where_there_is_a_gpu(monkeypatch):
    """There autograd's device threads, started by any backward, leave a forked child without autograd."""
    monkeypatch.setattr(ddp, "gpu_present", lambda: True)
    assert ddp.start_method("cpu") == ddp.start_method("cuda") == "forkserver"
    monkeypatch.undo()
    assert ddp.gpu_present() == torch.cuda.is_available()


def test_parallel_cuda_variants_run_where_cuda_exists_and_are_skipped_with_the_reason_elsewhere(assignment):
    g = grade_submission(ROOT / "reference", assignment, device="all", only=("parallel.ddp_train_step",))
    cuda = [t for t in g.tests if t.device == "cuda"]
    assert cuda and g.score == g.max_score == assignment.target("parallel", "ddp_train_step").points
    if torch.cuda.is_available():
        assert all(t.status == "passed" for t in cuda) and "cuda" in g.devices
    else:
        assert all(t.status == "skipped" and t.max_score == 0 for t in cuda)
        assert all("CUDA is not available" in t.output for t in cuda)
        assert g.devices == ["cpu"]


def test_device_cuda_grades_no_cpu_variant(assignment):
    g = grade_submission(ROOT / "reference", assignment, device="cuda", only=("parallel.wrap_ddp",))
    cpu = [t for t in g.tests if t.device == "cpu"]
    assert cpu and all(t.status == "skipped" and "--device cuda was chosen" in t.output for t in cpu)
