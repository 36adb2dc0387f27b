"""parallel.py graded on two real ranks: wrong submissions lose their own points, with messages that
say what went wrong, and no rank of a failed scenario outlives it (ranks in step are kept for the next)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchgrade.engine.config import load_assignment
from torchgrade.engine.differential import load_reference
from torchgrade.engine.grading import grade_submission
from torchgrade.sandbox.probes import ProbeError, Target, run_probe
from torchgrade.sandbox.probes import parallel as ddp
from torchgrade.sandbox import host
from torchgrade.sandbox.worker import CallRecorder

from conftest import ROOT, failures, lost_targets, make_submission

REFERENCE = load_reference(ROOT / "reference" / "parallel.py")


def descendants(pid: int = os.getpid()) -> set[int]:
    """Every process below `pid` (zombies too), from /proc: what a scenario must not leave behind."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def kept() -> set[int]:
    """The ranks of this process's groups kept, in step, for its next scenario (there by design)."""
    return {p.pid for group in ddp._idle.values() for p in group.processes}


def standing() -> set[int]:
    """What is there by design between scenarios: the kept ranks, and the process the portable sandbox
    (level process) starts ahead for its next worker, with the launcher's child."""
    spares = [z._spare.pid for z in host._zygotes.values() if getattr(z, "_spare", None) is not None]
    return kept() | {pid for spare in spares for pid in {spare} | descendants(spare)}


def batch(seed: int = 0, rows: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, 4, generator=generator, dtype=torch.float64),
            torch.randn(rows, 2, generator=generator, dtype=torch.float64))


# --- the reference, the stubs -------------------------------------------------------------------

def test_reference_scores_full_marks(assignment):
    g = grade_submission(ROOT / "reference", assignment, device="cpu", only=("parallel",))
    assert g.max_score == pytest.approx(assignment.exercise("parallel").points)
    assert g.score == g.max_score, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]


def test_untouched_stubs_score_zero(assignment):
    g = grade_submission(ROOT / "exercises", assignment, device="cpu", only=("parallel",))
    assert g.score == 0
    assert all("not implemented yet" in t.output for t in g.tests if t.status == "failed")


def test_the_reference_ranks_end_where_one_process_on_the_whole_batch_ends():
    """What the ddp_train checks hold a submission to is plain single-process training."""
    inputs, labels = batch(1)
    outcome = run_probe("ddp_train", Target(REFERENCE.ddp_train_step, "ddp_train_step"),
                        ("tiny_net_with_spare", (inputs, labels), "mse", "sgd_momentum"), {}, {"steps": 3})["value"]
    model = ddp.build("tiny_net_with_spare", 0, torch.device("cpu"), torch.float64)
    frozen = model.scale.clone()
    optimizer = ddp.OPTIMIZERS["sgd_momentum"](model.parameters(), 0.1)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = torch.nn.MSELoss()(model(inputs), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert outcome["same_losses_on_every_rank"] and outcome["same_on_every_rank"]
    for rank in ("rank 0", "rank 1"):
        assert outcome["losses"][rank] == pytest.approx(losses, rel=1e-12)
        torch.testing.assert_close(outcome["parameters_and_buffers"][rank], ddp.state(model))
        assert torch.equal(outcome["parameters_and_buffers"][rank]["scale"], frozen)


def test_wrap_ddp_of_the_reference_trains_like_the_hand_made_step():
    inputs, labels = batch(2)
    wrapped = run_probe("ddp_wrap", Target(REFERENCE.wrap_ddp, "wrap_ddp"), ("tiny_net",), {},
                        {"batch": (inputs, labels), "steps": 2})["value"]
    by_hand = run_probe("ddp_train", Target(REFERENCE.ddp_train_step, "ddp_train_step"),
                        ("tiny_net", (inputs, labels), "mse", "sgd"), {}, {"steps": 2})["value"]
    assert wrapped["wrapper_type"] == {"rank 0": "DistributedDataParallel", "rank 1": "DistributedDataParallel"}
    assert wrapped["device_ids"] == {"rank 0": None, "rank 1": None}
    # The wrapper's ranks started from different seeds; DDP broadcast rank 0's, which is seed 0.
    torch.testing.assert_close(wrapped["parameters_and_buffers"], by_hand["parameters_and_buffers"])


# --- wrong submissions --------------------------------------------------------------------------

def test_summing_instead_of_averaging_costs_average_gradients_and_the_step_that_calls_it(grade):
    g = grade(only=("parallel.average_gradients", "parallel.ddp_train_step"),
              replace={"parallel": [("            param.grad.div_(world_size)\n", "")]})
    assert lost_targets(g) == {"parallel.average_gradients", "parallel.ddp_train_step"}
    message = failures(g, "parallel.average_gradients")[0]
    assert "['gradients']['rank 0']" in message and "elements differ" in message


def test_returning_the_local_loss_costs_ddp_train_step(grade):
    g = grade(only=("parallel.ddp_train_step",), replace={"parallel": [
        ("    return total.item() / world_size\n", "    return loss.item()\n")]})
    assert lost_targets(g) == {"parallel.ddp_train_step"}
    assert all("same_losses_on_every_rank" in m and "expected True, got False" in m
               for m in failures(g, "parallel.ddp_train_step"))


def test_not_broadcasting_costs_broadcast_parameters(grade):
    g = grade(only=("parallel.broadcast_parameters",), append={"parallel": """
        def broadcast_parameters(model, src=0):
            pass
    """})
    assert lost_targets(g) == {"parallel.broadcast_parameters"}
    assert all("same_on_every_rank" in m and "expected True, got False" in m
               for m in failures(g, "parallel.broadcast_parameters"))


def test_rebuilding_the_parameters_instead_of_copying_in_place_is_caught(grade):
    g = grade(only=("parallel.broadcast_parameters",), append={"parallel": """
        def broadcast_parameters(model, src=0):
            for module in model.modules():
                for name, p in list(module.named_parameters(recurse=False)):
                    fresh = p.detach().clone()
                    dist.broadcast(fresh, src=src)
                    setattr(module, name, nn.Parameter(fresh, requires_grad=p.requires_grad))
            for b in model.buffers():
                dist.broadcast(b, src=src)
    """})
    assert lost_targets(g) == {"parallel.broadcast_parameters"}
    assert all("parameters_kept" in m and "expected True, got False" in m
               for m in failures(g, "parallel.broadcast_parameters"))


def test_a_shard_that_rebuilds_a_named_tuple_from_a_list_is_caught(grade):
    """type(batch)(items) raises TypeError for a named tuple (its fields are positional arguments)."""
    g = grade(only=("parallel.shard",), replace={"parallel": [
        ('        if hasattr(batch, "_fields"):  # a named tuple\n            return type(batch)(*items)\n', "")]})
    assert lost_targets(g) == {"parallel.shard"}
    assert any("TypeError" in m for m in failures(g, "parallel.shard"))


def test_collectives_on_a_strided_tensor_without_a_contiguous_copy_are_caught(grade):
    """On gloo a collective on w[:, ::2] silently mixes up values: strided_net's checks see it."""
    g = grade(only=("parallel.broadcast_parameters", "parallel.average_gradients"), replace={"parallel": [
        ("        buffer = tensor.contiguous()\n", "        buffer = tensor\n")]})
    assert lost_targets(g) == {"parallel.broadcast_parameters", "parallel.average_gradients"}


def test_a_strided_shard_costs_only_shard(grade):
    """batch[rank::world_size] gives the same mean gradient, so only shard's own checks can see it."""
    g = grade(only=("parallel.shard", "parallel.ddp_train_step"), replace={"parallel": [
        ("    return tensor.narrow(0, rank * per_rank, per_rank)\n", "    return tensor[rank::world_size]\n")]})
    assert lost_targets(g) == {"parallel.shard"}
    assert any("elements differ" in m for m in failures(g, "parallel.shard"))


def test_an_all_reduce_on_one_rank_only_fails_as_a_deadlock_and_leaves_no_process_behind(grade):
    grade(only=("parallel.shard",))  # the sandbox's zygote is up, and stays: it is no leftover
    before = descendants()
    g = grade(only=("parallel.ddp_train_step",), replace={"parallel": [
        ("    dist.all_reduce(total, op=dist.ReduceOp.SUM)\n",
         "    if dist.get_rank() == 0:\n        dist.all_reduce(total, op=dist.ReduceOp.SUM)\n")]})
    assert lost_targets(g) == {"parallel.ddp_train_step"}
    messages = failures(g, "parallel.ddp_train_step")
    # One step: rank 0 waits for an all_reduce rank 1 never makes. More steps: rank 1's next
    # collective meets it instead, and gloo aborts on the mismatch. Both are the student's to fix.
    hung = [m for m in messages if "ddp_train_step hung" in m]
    assert hung and all("deadlock" in m and "rank 0 was waiting at parallel.py line" in m for m in hung)
    assert all("hung" in m or "collective mismatch" in m for m in messages), messages
    assert not [t for t in g.tests if t.status == "error"]  # failed by the probe, not timed out by the host
    assert descendants() - standing() <= before


def test_a_rank_that_exits_fails_with_how_it_ended(grade):
    g = grade(only=("parallel.broadcast_parameters",), append={"parallel": """
        import os
        _broadcast_parameters = broadcast_parameters

        def broadcast_parameters(model, src=0):
            if dist.get_rank() == 1:
                os._exit(3)
            _broadcast_parameters(model, src)
    """})
    assert lost_targets(g) == {"parallel.broadcast_parameters"}
    assert all("rank 1 exited with status 3 while running broadcast_parameters" in m
               for m in failures(g, "parallel.broadcast_parameters"))


def test_the_hand_made_step_may_not_use_distributed_data_parallel(grade):
    g = grade(only=("parallel.ddp_train_step", "parallel.wrap_ddp"), append={"parallel": """
        def ddp_train_step(model, batch, loss_fn, optimizer):
            wrapped = torch.nn.parallel.DistributedDataParallel(model)
            inputs, targets = shard(batch, dist.get_rank(), dist.get_world_size())
            optimizer.zero_grad()
            loss = loss_fn(wrapped(inputs), targets)
            loss.backward()
            optimizer.step()
            return loss.item()
    """})
    assert lost_targets(g) == {"parallel.ddp_train_step"}
    assert failures(g, "parallel.ddp_train_step")[0].startswith(
        "forbidden call: ddp_train_step may not use `DistributedDataParallel`")


def test_forbidden_calls_made_on_a_rank_are_seen_at_run_time(tmp_path):
    """The ranks' own call records reach the worker's reply (the static scan cannot see this one)."""
    text = (ROOT / "assignment.yaml").read_text()
    text = text.replace("average_gradients: {points: 2, forbidden: *ddp}",
                        "average_gradients: {points: 2, forbidden: [div_]}")
    for key in ("reference", "checks", "stubs"):
        text = text.replace(f"\n{key}: ", f"\n{key}: {ROOT}/", 1)
    (tmp_path / "assignment.yaml").write_text(text)
    assignment = load_assignment(tmp_path / "assignment.yaml")
    submission = make_submission(tmp_path / "submission", replace={"parallel": [
        ("            param.grad.div_(world_size)\n", "            getattr(param.grad, 'div' + '_')(world_size)\n")]})
    g = grade_submission(submission, assignment, device="cpu", only=("parallel.average_gradients",))
    assert lost_targets(g) == {"parallel.average_gradients"}
    assert "may not use `div_`, found at parallel.py line" in failures(g, "parallel.average_gradients")[0]
    assert "(seen while it ran)" in failures(g, "parallel.average_gradients")[0]


# --- the probe itself ---------------------------------------------------------------------------

def _wait_in_different_collectives(model):
    import torch.distributed as dist

    if dist.get_rank() == 0:
        dist.barrier()
    else:
        dist.recv(torch.zeros(1), src=0)


def test_ranks_that_all_hang_are_stopped_at_the_deadline_and_reaped():
    before = descendants() - standing()
    with pytest.raises(ProbeError, match=r"average_gradients hung: it had not returned on any rank after 1 s"):
        ddp.run_on_ranks(Target(_wait_in_different_collectives, "average_gradients"), "average",
                         ("linear",), {}, {}, deadline=1.0)
    assert descendants() - standing() == before


def _record_a_division(model):
    REFERENCE.average_gradients(model)
    next(model.parameters()).grad.div_(1)


def test_calls_recorded_on_the_ranks_join_the_callers_record():
    recorder = CallRecorder(os.path.dirname(__file__) + os.sep)
    target = Target(_record_a_division, "average_gradients", lambda: recorder, recorder.calls)
    ddp.run_on_ranks(target, "average", ("linear",), {}, {})
    assert recorder.calls.get("div_", "").startswith("test_parallel.py:")


def test_ranks_from_the_fork_server_give_what_forked_ranks_give():
    """Ranks from the fork server (what CUDA needs) load the target from its file; on the CPU both agree."""
    target = Target(REFERENCE.broadcast_parameters, "broadcast_parameters")
    forked = ddp.run_on_ranks(target, "broadcast", ("batchnorm_net",), {}, {"seed": 3})
    served = ddp.run_on_ranks(target, "broadcast", ("batchnorm_net",), {}, {"seed": 3}, start="forkserver")
    torch.testing.assert_close(served, forked, rtol=0, atol=0)


def test_ranks_in_step_serve_the_next_scenario_and_a_group_out_of_step_is_discarded():
    average = Target(REFERENCE.average_gradients, "average_gradients")
    broadcast = Target(REFERENCE.broadcast_parameters, "broadcast_parameters")
    ddp._close_idle()  # groups earlier tests kept
    first = ddp.run_on_ranks(average, "average", ("tiny_net",), {}, {"seed": 1})
    ranks = kept()
    assert len(ranks) == ddp.WORLD_SIZE
    ddp.run_on_ranks(broadcast, "broadcast", ("batchnorm_net",), {}, {"seed": 3})  # another target, same ranks
    again = ddp.run_on_ranks(average, "average", ("tiny_net",), {}, {"seed": 1})
    torch.testing.assert_close(again, first, rtol=0, atol=0)  # every scenario starts alike
    assert kept() == ranks
    with pytest.raises(ProbeError, match="rank 1 exited with status 3"):
        ddp.run_on_ranks(Target(_exit_on_rank_1, "average_gradients"), "average", ("linear",), {}, {})
    assert not kept() & ranks and not descendants() & ranks  # a rank died: the other is killed and reaped


def _exit_on_rank_1(model):
    import torch.distributed as dist

    if dist.get_rank() == 1:
        os._exit(3)


def test_ranks_out_of_step_after_an_exception_are_not_kept():
    """Rank 0 makes one collective more than rank 1 before both raise: the next scenario gets new ranks."""
    ddp._close_idle()  # groups earlier tests kept
    ddp.run_on_ranks(Target(REFERENCE.average_gradients, "average_gradients"), "average", ("linear",), {}, {})
    ranks = kept()
    reply = ddp.run_on_ranks(Target(_raise_out_of_step, "average_gradients"), "average", ("linear",), {}, {})
    assert reply["__raised__"] == "ValueError"
    assert not kept() & ranks


def _raise_out_of_step(model):
    import torch.distributed as dist

    if dist.get_rank() == 0:
        dist.broadcast(torch.zeros(1), src=0)  # the root's send completes without the other rank
    raise ValueError("out of step")


def test_a_process_that_kept_ranks_still_exits(tmp_path):
    """multiprocessing waits for its children when a process it started exits (a pool worker): the kept
    ranks are closed first, or the pool would never shut down."""
    script = tmp_path / "keeps_ranks.py"
    script.write_text(f"""
import multiprocessing, sys
sys.path.insert(0, {str(ROOT)!r})
from torchgrade.engine.differential import load_reference
from torchgrade.sandbox.probes import Target, parallel as ddp

def grade_once():
    reference = load_reference(__import__("pathlib").Path({str(ROOT / "reference" / "parallel.py")!r}))
    ddp.run_on_ranks(Target(reference.average_gradients, "average_gradients"), "average", ("linear",), {{}}, {{}})
    assert ddp._idle

if __name__ == "__main__":
    worker = multiprocessing.get_context("fork").Process(target=grade_once)
    worker.start()
    worker.join(60)
    print("still running" if worker.is_alive() else f"exit {{worker.exitcode}}")
    worker.kill()
""")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert done.stdout.strip() == "exit 0", done.stdout + done.stderr


def test_a_kept_group_whose_rank_died_meanwhile_is_replaced():
    ddp._close_idle()  # groups earlier tests kept
    average = Target(REFERENCE.average_gradients, "average_gradients")
    first = ddp.run_on_ranks(average, "average", ("tiny_net",), {}, {"seed": 2})
    (group,) = ddp._idle.values()
    os.kill(group.processes[1].pid, signal.SIGKILL)  # as a thread exiting in its parent would (PDEATHSIG)
    group.processes[1].join()
    again = ddp.run_on_ranks(average, "average", ("tiny_net",), {}, {"seed": 2})
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    assert not kept() & {p.pid for p in group.processes} and not descendants() & {p.pid for p in group.processes}


RANK_SERVER = r"""
import json, os, resource, sys
import psutil, torch
from torchgrade.engine.differential import load_reference
from torchgrade.sandbox.probes import Target, run_probe
from torchgrade.sandbox.probes import parallel as ddp

hand = ddp.fork_rank_server()
server = psutil.Process(ddp.multiprocessing.forkserver._forkserver._forkserver_pid)
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
limit = psutil.Process().memory_info().vms + (6 << 30)  # what the worker sets once CUDA has started
resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
hand()
ddp.start_method = lambda device: "forkserver"  # as on a machine with a GPU
from pathlib import Path
reference = load_reference(Path(sys.argv[1]))
gen = torch.Generator().manual_seed(1)
inputs, labels = torch.randn(8, 4, generator=gen, dtype=torch.float64), torch.randn(8, 2, generator=gen, dtype=torch.float64)
outcome = run_probe("ddp_train", Target(reference.ddp_train_step, "ddp_train_step"),
                    ("tiny_net_with_spare", (inputs, labels), "mse", "sgd_momentum"), {}, {"steps": 2})["value"]
ranks = [p for group in ddp._idle.values() for p in group.processes]
print(json.dumps({"same": outcome["same_on_every_rank"], "server_parent": server.ppid(), "me": os.getpid(),
                  "server_cmdline": server.cmdline() == psutil.Process().cmdline(),
                  "rank_parents": sorted({psutil.Process(p.pid).ppid() for p in ranks}), "server": server.pid,
                  "rank_limits": sorted({psutil.Process(p.pid).rlimit(psutil.RLIMIT_AS)[0] for p in ranks}),
                  "limit": limit}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the rank server is forked on Linux only")
def test_a_rank_server_forked_from_the_worker_serves_ranks_with_the_workers_limits():
    """On a GPU machine a worker forks its ranks' fork server before starting CUDA (instead of a fresh
    Python importing torch for it): ranks come from that fork, with the limits the worker set after."""
    done = subprocess.run([sys.executable, "-c", RANK_SERVER, str(ROOT / "reference" / "parallel.py")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert seen["same"] is True
    assert seen["server_parent"] == seen["me"] and seen["server_cmdline"]  # a fork, not a new Python
    assert seen["rank_parents"] == [seen["server"]]
    assert seen["rank_limits"] == [seen["limit"]]


def test_a_worker_forks_its_rank_server_wherever_ranks_come_from_one(monkeypatch):
    """CUDA ranks, and CPU ranks on a machine with a GPU whose CUDA is hidden from the grader (ranks then
    come from a fork server too): the worker forks that server itself, instead of a fresh Python later."""
    from torchgrade.sandbox import worker

    assert not worker.ranks_from_a_server({"ranks": False, "cuda": True})
    assert worker.ranks_from_a_server({"ranks": True, "cuda": True})
    monkeypatch.setattr(ddp, "gpu_present", lambda: True)  # device nodes, CUDA_VISIBLE_DEVICES=""
    assert ddp.start_method("cpu") == ("forkserver" if sys.platform.startswith("linux") else "spawn")
    assert worker.ranks_from_a_server({"ranks": True, "cuda": False}) == sys.platform.startswith("linux")
    monkeypatch.setattr(ddp, "gpu_present", lambda: False)
    assert not worker.ranks_from_a_server({"ranks": True, "cuda": False})
