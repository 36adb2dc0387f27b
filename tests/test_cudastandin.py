"""The compiled CUDA stand-in (torchgrade/sandbox/cudastandin.cpp), EXPERIMENTAL: one specification
(docs/devices.md), two implementations.

tests/standin_cases.py runs the specification's cases on one stand-in in a process of its own (the
compiled one is loaded before torch and never leaves its process); here both run and must agree on every
case, except the differences listed in KNOWN (each must still be one, so the list stays true).
Built once per machine into the user's cache, as the compiled observer is (tests/conftest.py); where it
cannot be built (no compiler, no torch headers) these tests are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from torchgrade.sandbox import cudastandin

from conftest import ROOT

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a stand-in for a torch built without CUDA")

CASES = ROOT / "tests" / "standin_cases.py"

#: Cases where the two stand-ins differ on purpose, and why: each is one where the compiled stand-in
#: does what a GPU does and the Python one sets the case aside or misses a mistake (docs/devices.md).
KNOWN = {
    "resize_ grows": "the Python stand-in sets growing resize_ aside; the compiled one models it",
    "out= resized": "the Python stand-in sets an out= it must grow aside; the compiled one models it",
    "set_ to another tensor": "the Python stand-in sets set_ aside; the compiled one models it",
    "cpu generator for a cuda op": "a GPU raises for a CPU generator; the Python stand-in draws from it (a known miss)",
}


@pytest.fixture(scope="module")
def library() -> str:
    saved = os.environ.pop("TORCHGRADE_CACHE_DIR", None)  # (the user's cache, as for the observer)
    try:
        return str(cudastandin.build())
    except cudastandin.BuildError as e:
        pytest.skip(f"the compiled stand-in cannot be built here: {e}")
    finally:
        if saved is not None:
            os.environ["TORCHGRADE_CACHE_DIR"] = saved


def _outcomes(way: str, library: str) -> dict:
    env = {**os.environ, cudastandin.ENV_VAR: library}
    done = subprocess.run([sys.executable, str(CASES), way], capture_output=True, text=True, env=env, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def outcomes(library: str) -> dict[str, dict]:
    return {way: _outcomes(way, library) for way in ("python", "compiled")}


def test_the_compiled_stand_in_loads_and_runs_every_case(outcomes):
    assert "error" not in outcomes["compiled"]
    assert outcomes["compiled"].keys() == outcomes["python"].keys()


def test_both_stand_ins_give_the_same_outcome_on_every_case_but_the_known_differences(outcomes):
    python, compiled = outcomes["python"], outcomes["compiled"]
    differ = {case for case in python if python[case] != compiled[case]}
    assert differ - KNOWN.keys() == set(), {case: (python[case], compiled[case]) for case in differ - KNOWN.keys()}
    assert KNOWN.keys() - differ == set(), "no longer a difference: remove it from KNOWN"


def test_compiled_tensors_are_cuda_tensors_with_the_cpus_values(outcomes):
    compiled = outcomes["compiled"]
    assert compiled["factory device=cuda"] == ["ok", ["tensor", "cuda:0", "torch.float32", [6], [0, 1, 2, 3, 4, 5],
                                                       False]]
    assert compiled["bare factory stays on the cpu"][1][1] == "cpu"
    assert compiled[".to('cuda') is no copy"] == ["ok", [True, True, True]]
    assert compiled["repr"] == ["ok", "tensor([2., 2.], device='cuda:0', grad_fn=<MulBackward0>)"]
    assert compiled["inference_mode views of a normal tensor"] == ["ok", [False, True, False]]
    assert compiled["torch.cuda.is_available"] == ["ok", False]  # (as docs/devices.md says of the student's code)


def test_mixing_devices_raises_cudas_error_and_cpu_scalars_mix(outcomes):
    compiled = outcomes["compiled"]
    mixed = ["raises", "RuntimeError",
             "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"]
    for case in ("cpu tensor mixed in", "linear with cpu weights", "cat of mixed devices", "matmul with a cpu tensor",
                 "in place into a cpu scalar", "in place cpu tensor from cuda"):
        assert compiled[case] == mixed, case
    for case in ("cpu 0-d scalar is allowed", "python number is allowed", "where with a cpu 0-d scalar",
                 "cpu indices for a cuda tensor", "cpu mask for a cuda tensor", "copy_ across devices"):
        assert compiled[case][0] == "ok" and compiled[case][1][1] == "cuda:0", case
    assert compiled["cuda indices for a cpu tensor"][:2] == ["raises", "RuntimeError"]
    assert compiled["numpy of a cuda tensor"][:2] == ["raises", "TypeError"]


def test_the_traps_behave_as_on_a_gpu(outcomes):
    """CUDA-only kernels torch's composites pick when is_cuda() (fused RNN cells, depthwise convolution),
    resize_ and out= on shared memory, a CPU generator, torch.cuda's own API."""
    compiled = outcomes["compiled"]
    for case in ("fused rnn cells (LSTMCell)", "fused rnn cells (GRU)", "depthwise convolution", "resize_ grows",
                 "out= resized", "set_ to another tensor", "deepcopy", "training steps (Adam)", "backward"):
        assert compiled[case][0] == "ok", (case, compiled[case])
    assert compiled["cpu generator for a cuda op"] == [
        "raises", "RuntimeError", "Expected a 'cuda' device type for generator but found 'cpu'"]
    assert compiled["torch.cuda.get_rng_state"][0] == "raises"


def test_the_cuda_only_mistakes_fail_and_the_reference_does_not(outcomes):
    compiled = outcomes["compiled"]
    assert compiled["custom backward with a cpu constant"][:2] == ["raises", "RuntimeError"]
    assert compiled["custom backward, reference"][0] == "ok"
    assert compiled["one_hot, zeros on the cpu"][0] == "raises" or compiled["one_hot, zeros on the cpu"][1][1] == "cpu"
    assert compiled["one_hot, reference"][1][1] == "cuda:0"
    assert compiled["corr2d, zeros on the cpu"][1][1] == "cpu" and compiled["corr2d, reference"][1][1] == "cuda:0"


def test_it_is_not_loaded_once_torch_is_imported(library):
    """torch._C asks for CUDA's hooks once, as it starts: loaded later, autograd would fail on its tensors."""
    code = "import torch\nfrom torchgrade.sandbox import cudastandin\nprint(cudastandin.load() is None)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, cudastandin.ENV_VAR: library})
    assert done.stdout.strip() == "True", done.stderr[-2000:]


def test_without_a_compiler_it_is_not_built_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHGRADE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(cudastandin.ENV_VAR, raising=False)
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with pytest.raises(cudastandin.BuildError, match="no C\\+\\+ compiler"):
        cudastandin.build()
    assert cudastandin.built() is None
