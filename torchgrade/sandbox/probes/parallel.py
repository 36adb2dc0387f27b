"""Probes for parallel.py: each scenario runs the target on two real ranks of a ``torch.distributed`` group.

The ranks are child processes of the process the probe runs in (the sandbox worker for a student,
the trusted process for the reference). On the CPU they are forked: the parent has imported torch
already, so a rank starts in milliseconds. On CUDA they come from multiprocessing's fork server,
because a process that has initialised CUDA cannot fork children that use it. The group meets
through a file in a private temporary folder (no port to collide on), uses gloo (NCCL when every
rank has a GPU of its own), and has a timeout on init and on every collective.

The parent waits for every rank's answer against a deadline. The first rank that raises, crashes
or sends something that is not plain data ends the scenario; a rank still busy ``grace`` seconds
after another finished is stuck (a collective called on one rank only waits forever), and its stack
is dumped so the message can say where. Every rank is then killed and reaped: nothing is left
behind. A check compares what comes back, rank by rank, with the reference's.

Models, losses and optimizers cannot cross the boundary, so a check names them (``MODELS``,
``LOSSES``, ``OPTIMIZERS``) and each rank builds its own from a seed.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib.util
import linecache
import multiprocessing
import multiprocessing.util
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn

from torchgrade.sandbox import wire
from torchgrade.sandbox.exits import describe_exit
from torchgrade.sandbox import linetrace
from torchgrade.sandbox.isolation import gpu_device_nodes
from torchgrade.sandbox.probes.core import ProbeError, Raised, Target, describe, probe, raised

#: Why the CUDA stand-in does not grade the data-parallel checks (torchgrade/sandbox/standin.py).
RANKS_ELSEWHERE = "the data-parallel ranks run in processes of their own, where the CUDA stand-in does not reach"

WORLD_SIZE = 2
#: Seconds every rank has to answer (forked ranks); ranks of a fork server may first have to start it
#: (import torch afresh) and CUDA.
DEADLINE_S = 10.0
SERVER_DEADLINE_S = 25.0
#: What the fork server imports once for all the ranks it forks.
SERVER_PRELOAD = ["torchgrade.sandbox.probes.parallel", "torch._dynamo"]
#: Seconds a rank may still be busy after another rank finished before it counts as stuck.
GRACE_S = 3.0
#: The process group's own timeout (init and each collective) is longer, so that the deadline
#: above, which can say which rank hung and where, is what fires.
GROUP_TIMEOUT_MARGIN_S = 5.0
#: After the first failure, how long the other ranks have to show whether one of them died (the cause).
SWEEP_S = 0.5
#: How long a stuck rank has to write its stack (at once, unless the machine is busy).
STACK_WAIT_S = 3.0
#: How much of a crashed rank's stderr is quoted.
STDERR_TAIL = 1500


# --- what a check can name -----------------------------------------------------------------------

FEATURES, CLASSES = 4, 2


class TinyNet(nn.Module):
    """``Linear -> tanh -> Linear``, times a frozen parameter ``scale``, plus a buffer ``offset``."""

    def __init__(self, spare: bool = False):
        super().__init__()
        self.body = nn.Linear(FEATURES, 8)
        self.head = nn.Linear(8, CLASSES)
        self.scale = nn.Parameter(torch.rand(CLASSES) + 0.5, requires_grad=False)
        self.register_buffer("offset", torch.randn(CLASSES))
        if spare:  # trainable, but not used by forward: its .grad stays None
            self.spare = nn.Parameter(torch.randn(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(x))) * self.scale + self.offset


def strided_net() -> nn.Module:
    """TinyNet whose ``head.weight`` is a strided view (every other column of a wider tensor): a parameter
    that is not contiguous, which ``dist.broadcast`` and ``dist.all_reduce`` on gloo silently garble."""
    model = TinyNet()
    weight = model.head.weight.detach()
    wide = torch.zeros(weight.shape[0], 2 * weight.shape[1], dtype=weight.dtype)
    wide[:, ::2] = weight
    model.head.weight = nn.Parameter(wide[:, ::2])
    return model


#: Architectures a check may name; each takes FEATURES inputs and gives CLASSES outputs.
MODELS: dict[str, Callable[[], nn.Module]] = {
    "linear": lambda: nn.Linear(FEATURES, CLASSES),
    "tiny_net": TinyNet,
    "tiny_net_with_spare": lambda: TinyNet(spare=True),
    "strided_net": strided_net,
    "batchnorm_net": lambda: nn.Sequential(nn.Linear(FEATURES, 8), nn.BatchNorm1d(8), nn.Tanh(),
                                           nn.Linear(8, CLASSES)),
    # left in eval mode, as after an evaluation: a training step must put it back in training mode
    "batchnorm_net_in_eval_mode": lambda: nn.Sequential(nn.Linear(FEATURES, 8), nn.BatchNorm1d(8), nn.Tanh(),
                                                        nn.Linear(8, CLASSES)).eval(),
}
LOSSES: dict[str, Callable[[], nn.Module]] = {"mse": nn.MSELoss, "cross_entropy": nn.CrossEntropyLoss}
OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr),
    # weight decay moves a parameter whose .grad is a tensor of zeros: a frozen one must keep None
    "sgd_momentum": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=0.01),
    "adam": lambda params, lr: torch.optim.Adam(params, lr=lr),
}


def build(name: str, seed: int, device: torch.device, dtype: torch.dtype | None = None) -> nn.Module:
    """The model `name`, initialised from `seed` on the CPU (the same numbers on every device), then moved."""
    if name not in MODELS:
        raise ProbeError(f"unknown model {name!r} (known: {', '.join(MODELS)})")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MODELS[name]()
    return model.to(device=device, dtype=dtype)


def state(model: nn.Module) -> dict:
    """Every parameter and buffer, by name, as detached copies."""
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


# --- where the ranks run -------------------------------------------------------------------------

def placement(device: str, rank: int, cuda_devices: int, nccl: bool) -> tuple[torch.device, str]:
    """Rank `rank`'s device and the group's backend: NCCL when every rank has a GPU of its own, else gloo."""
    if device == "cuda":
        if cuda_devices >= WORLD_SIZE and nccl:
            return torch.device("cuda", rank), "nccl"
        return torch.device("cuda", 0), "gloo"  # two ranks on one GPU: NCCL refuses, gloo stages through host
    return torch.device(device), "gloo"


def gpu_present() -> bool:
    """Whether this machine has a GPU, asked without starting CUDA: NVIDIA's or AMD's device nodes (the
    sandbox binds them), or CUDA already started in this process."""
    return bool(gpu_device_nodes()) or torch.cuda.is_initialized()


def start_method(device: str) -> str:
    """fork (milliseconds) on a machine without a GPU. Elsewhere, and always for CUDA ranks, they are forked
    from multiprocessing's fork server, a fresh process that imports torch once and never touches CUDA
    (its first start costs what a spawn does, later ones little more than a fork): a child forked from a
    process that started CUDA cannot use it, and on a machine with a GPU autograd's first backward starts
    threads per device, after which a forked child cannot use autograd either (seen on an H100: the CPU
    ranks of the reference failed with "Unable to handle autograd's threading in combination with
    fork-based multiprocessing"). Outside Linux they are spawned: Windows cannot fork, and macOS cannot
    fork safely once torch is imported."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return "spawn"
    return "forkserver" if device == "cuda" or gpu_present() else "fork"


# --- the scenarios, run on every rank ------------------------------------------------------------

def _broadcast(target: Target, rank: int, device: torch.device, args: tuple, kwargs: dict, seed: int = 0) -> dict:
    """Each rank builds the model from its own seed and runs a few forward passes (BatchNorm statistics
    then differ too); then the target makes every rank's parameters and buffers equal rank src's."""
    model = build(args[0], seed + rank, device)
    generator = torch.Generator().manual_seed(seed * 100 + rank)
    with torch.no_grad():
        for _ in range(rank + 1):
            model(torch.randn(6, FEATURES, generator=generator).to(device))
    before = list(model.parameters())
    target(model, *args[1:], **kwargs)
    after = list(model.parameters())
    return {
        "parameters_and_buffers": state(model),
        "parameters_kept": len(before) == len(after) and all(a is b for a, b in zip(before, after)),
        "requires_grad": {name: p.requires_grad for name, p in model.named_parameters()},
    }


def _average(target: Target, rank: int, device: torch.device, args: tuple, kwargs: dict, seed: int = 0) -> dict:
    """Identical replicas whose gradients differ per rank (random, from seed and rank); parameters
    that are frozen or unused (named ``spare``) have none. The target averages them."""
    model = build(args[0], seed, device)
    generator = torch.Generator().manual_seed(seed * 100 + rank)
    for name, p in model.named_parameters():
        if p.requires_grad and "spare" not in name:
            grad = torch.randn(p.shape, generator=generator, dtype=p.dtype).to(device)
            # laid out like its parameter (as autograd lays out a dense one's): strided for strided_net
            p.grad = torch.empty_strided(p.shape, p.stride(), dtype=p.dtype, device=device).copy_(grad)
    target(model, *args[1:], **kwargs)
    return {"gradients": {name: p.grad for name, p in model.named_parameters()}}


def _train(target: Target, rank: int, device: torch.device, args: tuple, kwargs: dict, seed: int = 0,
           steps: int = 3, lr: float = 0.1) -> dict:
    """Identical replicas (one seed) train for `steps` calls of the target on the same global batch."""
    name, batch, loss_name, optimizer_name = args
    batch = type(batch)(t.to(device) for t in batch)
    dtype = batch[0].dtype if batch[0].is_floating_point() else None
    model = build(name, seed, device, dtype)
    optimizer = OPTIMIZERS[optimizer_name](model.parameters(), lr)
    loss_fn = LOSSES[loss_name]()
    losses = [target(model, batch, loss_fn, optimizer, **kwargs) for _ in range(steps)]
    return {"losses": losses, "parameters_and_buffers": state(model)}


def _wrap(target: Target, rank: int, device: torch.device, args: tuple, kwargs: dict, batch: tuple = (),
          loss: str = "mse", seed: int = 0, steps: int = 2, lr: float = 0.1) -> dict:
    """Each rank builds the model from its own seed on the CPU and wraps it; the probe then trains the
    wrapper on the rank's block of the batch, as every DDP program does."""
    dtype = batch[0].dtype if batch and batch[0].is_floating_point() else None
    model = build(args[0], seed + rank, torch.device("cpu"), dtype)
    wrapped = target(model, *args[1:], **kwargs)
    is_ddp = isinstance(wrapped, nn.parallel.DistributedDataParallel)
    facts = {"wrapper_type": type(wrapped).__name__,
             "wraps_the_model": getattr(wrapped, "module", None) is model,
             "device_ids": list(wrapped.device_ids) if is_ddp and wrapped.device_ids is not None else None}
    losses = []
    if is_ddp:
        optimizer = torch.optim.SGD(wrapped.parameters(), lr=lr)
        loss_fn = LOSSES[loss]()
        per_rank = batch[0].shape[0] // WORLD_SIZE
        inputs, labels = (t.narrow(0, rank * per_rank, per_rank).to(device) for t in batch)
        for _ in range(steps):
            optimizer.zero_grad()
            value = loss_fn(target.run(wrapped, inputs), labels)
            target.drive(value.backward)
            optimizer.step()
            losses.append(value.item())
    return {**facts, "losses": losses, "parameters_and_buffers": state(model)}


SCENARIOS: dict[str, Callable[..., dict]] = {"broadcast": _broadcast, "average": _average, "train": _train,
                                             "wrap": _wrap}


# --- one rank ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Group:
    """How a set of ranks is started and joined (picklable, for ranks that are not forked from here)."""

    device: str
    folder: str  #: private: the rendezvous file, each rank's stderr and stack dump
    timeout: float  #: the process group's own timeout, on init and on every collective
    forked: bool  #: the ranks are forks of the process that asked (else children of a fork server)
    #: Forked ranks: the target the group was started for, by id() (other targets are found in their module).
    known: dict = field(default_factory=dict)

    def file(self, rank: int, kind: str) -> str:
        """A rank's own file in the group's folder: its stderr ("err") or its stack dump ("stack")."""
        return os.path.join(self.folder, f"rank{rank}.{kind}")


@dataclass(frozen=True)
class _Job:
    """One scenario for every rank of a group (picklable)."""

    scenario: str
    payload: bytes  #: wire-encoded (args, kwargs, options)
    name: str  #: the target's name in its module
    identity: int  #: id() of the target's object in the process that asked
    locator: tuple[str, str] | None  #: (module name, file) of the module that has it under `name`
    record: bool  #: record the torch calls the target makes (the sandbox's side)


class _UnknownTarget(Exception):
    """A rank forked before the target existed cannot run it: the group is started again, knowing it."""


_stack_file = None  # kept open for faulthandler


def _die_with_parent() -> None:
    """Ask Linux to kill this rank if the process that started it dies first."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _find(group: _Group, job: _Job) -> Any:
    """The target's object in this rank. A forked rank has the very object of the process that asked,
    if it existed when the rank was forked; a rank of a fork server loads the module from its file."""
    if group.forked:
        found = group.known.get(job.identity)
        if found is None and job.locator is not None:
            found = getattr(sys.modules.get(job.locator[0]), job.name, None)
        if found is None or id(found) != job.identity:
            raise _UnknownTarget(job.name)
        return found
    module_name, file = job.locator
    module = sys.modules.get(module_name)
    if getattr(module, "__file__", None) != file:
        sys.path.insert(0, os.path.dirname(file))
        spec = importlib.util.spec_from_file_location(module_name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return getattr(module, job.name)


def _target(group: _Group, job: _Job) -> Target:
    obj = _find(group, job)
    if not job.record:
        return Target(obj, job.name)
    from torchgrade.sandbox.recorder import CallRecorder

    code = getattr(obj, "__code__", None) or getattr(getattr(obj, "__init__", None), "__code__", None)
    file = job.locator[1] if job.locator else (code.co_filename if code is not None else "")
    recorder = CallRecorder(os.path.dirname(file) + os.sep)
    return Target(obj, job.name, lambda drive=False: recorder, recorder.calls)


def _sequence() -> int:
    """How many collectives this rank has made in the default group (-1: the group is gone)."""
    try:
        return int(dist.distributed_c10d._get_default_group()._get_sequence_number_for_group())
    except Exception:
        return -1


def _run_rank(group: _Group, job: _Job, rank: int) -> dict:
    try:
        target = _target(group, job)
    except _UnknownTarget:
        return {"unknown_target": True}
    device, _ = placement(group.device, rank, torch.cuda.device_count() if group.device == "cuda" else 0,
                          dist.is_nccl_available())
    args, kwargs, options = wire.decode(job.payload)
    try:
        reply = {"value": describe(SCENARIOS[job.scenario](target, rank, device, tuple(args), kwargs, **options))}
    except Raised as e:
        reply = {"raised": raised(e.error)}
    except ProbeError as e:
        reply = {"probe_error": str(e)}
    if target.calls is not None:
        reply["calls"] = dict(target.calls)
    reply["sequence"] = _sequence()
    return reply


def _join(group: _Group, rank: int) -> None:
    device, backend = placement(group.device, rank, torch.cuda.device_count() if group.device == "cuda" else 0,
                                dist.is_nccl_available())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if backend == "gloo" and os.path.exists("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the ranks share this machine: loopback always works
    dist.init_process_group(backend, init_method=f"file://{group.folder}/rendezvous", rank=rank,
                            world_size=WORLD_SIZE, timeout=timedelta(seconds=group.timeout))


def _rank_main(group: _Group, rank: int, conn: Connection) -> None:
    """A rank's life: join the group, then run each scenario it is sent and answer, until it is killed.

    Every scenario starts from the random state the rank started with, and its stderr file holds
    only what that scenario printed.
    """
    global _stack_file
    _die_with_parent()
    torch.set_num_threads(1)  # a forked OpenMP pool is unusable (DataLoader workers do the same)
    err = os.open(group.file(rank, "err"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(err, 2)
    _stack_file = open(group.file(rank, "stack"), "w")
    if hasattr(signal, "SIGUSR1"):  # not on Windows: a stuck rank's stack is not shown there
        faulthandler.register(signal.SIGUSR1, file=_stack_file, all_threads=True)
    random_state = torch.get_rng_state()
    try:
        _join(group, rank)
        failure = None
    except BaseException as e:
        failure = f"rank {rank} could not join the process group: {type(e).__name__}: {e}"[:2000]
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        with contextlib.suppress(Exception):
            sys.stderr.flush()
            os.ftruncate(2, 0)
        torch.set_rng_state(random_state)
        try:
            reply = {"probe_error": failure} if failure else _run_rank(group, job, rank)
        except BaseException as e:  # the target's module could not load
            reply = {"probe_error": f"rank {rank} could not run: {type(e).__name__}: {e}"[:2000]}
        try:
            frame = wire.encode(reply)
        except BaseException as e:
            frame = wire.encode({"probe_error": f"the result could not be sent back: {type(e).__name__}: {e}"[:2000]})
        conn.send_bytes(frame)


# --- the parent: start, watch, stop --------------------------------------------------------------

def _tail(path: str, limit: int = STDERR_TAIL) -> str:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read().decode("utf-8", errors="replace").strip()
    return ""


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


def _stuck_at(path: str, own_dir: str | None) -> str:
    """Where a dumped rank was: the innermost frame in the target's own folder."""
    for m in _FRAME.finditer(_tail(path, 64 * 1024)):
        if own_dir and m["file"].startswith(own_dir):
            source = linecache.getline(m["file"], int(m["line"])).strip()
            where = f"{os.path.basename(m['file'])} line {m['line']}, in {m['function']}"
            return f"{where}: {source}" if source else where
    return ""


def _merge_calls(target: Target, reply: dict) -> None:
    """What a rank recorded joins the worker's record, so forbidden calls made on a rank are seen."""
    calls = reply.get("calls")
    if target.calls is None or not isinstance(calls, dict):
        return
    for name, where in calls.items():
        if isinstance(name, str) and isinstance(where, str):
            target.calls.setdefault(name, where)


@dataclass
class _Ending:
    """How the ranks of one scenario ended."""

    replies: dict[int, dict]
    died: dict[int, int | None]
    hung: list[int]

    def in_step(self) -> bool:
        """Every rank answered, none failed the probe, and all made the same number of collectives in the
        group, which is still there: the next scenario may use the same ranks."""
        if self.died or self.hung or len(self.replies) != WORLD_SIZE:
            return False
        sequences = {reply.get("sequence") for reply in self.replies.values()}
        return (len(sequences) == 1 and isinstance(next(iter(sequences)), int) and next(iter(sequences)) >= 0
                and all("value" in reply or "raised" in reply for reply in self.replies.values()))


def _read(conn: Connection, rank: int, process: Any, ending: _Ending) -> bool:
    """Take one rank's reply (or note its death); True when it is a value, so the scenario can go on."""
    try:
        reply = wire.decode(conn.recv_bytes(wire.MAX_FRAME_BYTES))
    except (EOFError, OSError):
        process.join(1.0)
        ending.died[rank] = process.exitcode
        return False
    except wire.WireError as e:
        reply = {"probe_error": f"rank {rank} sent back something that is not plain data: {e}"}
    if type(reply) is not dict:
        reply = {"probe_error": f"rank {rank} sent back a {type(reply).__name__}, not its outcome"}
    ending.replies[rank] = reply
    return "value" in reply


def _collect(processes: list, conns: list[Connection], deadline: float, grace: float) -> _Ending:
    """Wait for every rank's reply; stop at the first failure, the deadline, or `grace` after a reply."""
    pending = {conn: rank for rank, conn in enumerate(conns)}
    ending = _Ending({}, {}, [])
    end = time.monotonic() + deadline
    first_reply: float | None = None
    failed = False
    while pending and not failed:
        limit = end if first_reply is None else min(end, first_reply + grace)
        remaining = limit - time.monotonic()
        if remaining <= 0:
            break
        for conn in wait(list(pending), remaining):
            rank = pending.pop(conn)
            failed = not _read(conn, rank, processes[rank], ending) or failed
            first_reply = first_reply or time.monotonic()
    if not failed:
        ending.hung = sorted(pending.values())
        return ending
    # A rank that died makes the others fail too ("connection closed by peer"): look for the cause.
    end = time.monotonic() + SWEEP_S
    while pending and (remaining := end - time.monotonic()) > 0:
        for conn in wait(list(pending), remaining):
            rank = pending.pop(conn)
            _read(conn, rank, processes[rank], ending)
    return ending


def _preload() -> None:
    """Import here, once, what each forked rank would otherwise import for itself: building any optimizer
    imports torch._dynamo (over a second)."""
    import torch._dynamo  # noqa: F401


class _Ranks:
    """WORLD_SIZE rank processes joined in one process group, kept for the next scenario while in step.

    Forking two ranks and joining a group costs about 30 ms, more than most scenarios; a group whose
    ranks all answered and made the same collectives serves the next scenario too. Any other ending
    (a rank raised or failed the probe out of step, died, hung) discards it.
    """

    def __init__(self, start: str, group: _Group):
        context = multiprocessing.get_context(start)
        if start == "forkserver":
            context.set_forkserver_preload(SERVER_PRELOAD)  # no effect once the server runs
        else:
            _preload()
        self.group = group
        self.processes: list = []
        self.conns: list[Connection] = []
        for rank in range(WORLD_SIZE):
            ours, theirs = context.Pipe()
            process = context.Process(target=_rank_main, args=(group, rank, theirs), name=f"torchgrade rank {rank}")
            process.start()
            theirs.close()
            self.processes.append(process)
            self.conns.append(ours)

    def alive(self) -> bool:
        return all(p.is_alive() for p in self.processes)

    def run(self, job: _Job, deadline: float, grace: float) -> _Ending:
        ending = _Ending({}, {}, [])
        for rank, conn in enumerate(self.conns):
            try:
                conn.send(job)
            except OSError:
                self.processes[rank].join(1.0)
                ending.died[rank] = self.processes[rank].exitcode
        return ending if ending.died else _collect(self.processes, self.conns, deadline, grace)

    def dump_stacks(self, ranks: list[int]) -> None:
        """Ask each stuck rank for its Python stack (faulthandler writes it), waiting for it."""
        if not hasattr(signal, "SIGUSR1"):
            return
        for rank in ranks:
            with contextlib.suppress(OSError):
                os.kill(self.processes[rank].pid, signal.SIGUSR1)
        paths = [self.group.file(rank, "stack") for rank in ranks]
        end = time.monotonic() + STACK_WAIT_S
        while time.monotonic() < end and not all(os.path.exists(p) and os.path.getsize(p) for p in paths):
            time.sleep(0.02)

    def close(self) -> None:
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.join()
        for conn in self.conns:
            conn.close()
        shutil.rmtree(self.group.folder, ignore_errors=True)


#: Groups kept between scenarios, by (device, start method, group timeout); one process's own.
_idle: dict[tuple, _Ranks] = {}
_closes_at_exit = 0  # the pid that registered _close_idle


def _keep(key: tuple, ranks: _Ranks) -> None:
    """Keep a group for the next scenario, closed when this process exits. At exit multiprocessing waits
    for every child it started, ranks included (in a pool worker, before atexit handlers run); its
    finalizers with a priority run first. A process it forks starts with none: register per process."""
    global _closes_at_exit
    if _closes_at_exit != os.getpid():
        multiprocessing.util.Finalize(None, _close_idle, exitpriority=100)
        _closes_at_exit = os.getpid()
    _idle[key] = ranks


def _close_idle() -> None:
    while _idle:
        _idle.popitem()[1].close()


if hasattr(os, "register_at_fork"):  # not on Windows, where nothing forks
    os.register_at_fork(after_in_child=_idle.clear)  # in a forked child the ranks are the parent's


def _run(job: _Job, key: tuple, target: Target, start: str, device: str, deadline: float,
         grace: float) -> tuple[_Ranks, _Ending]:
    """Run a job on the kept group for `key`; a kept group that fails at once (a rank died meanwhile, or
    the ranks were forked before the target existed) is replaced by a new one, as is a missing one."""
    kept = _idle.pop(key, None)
    if kept is not None:
        if kept.alive():
            ending = _attempt(kept, job, deadline, grace)
            if not (ending.died or _unknown(ending)):
                return kept, ending
        kept.close()
    known = {id(target.obj): target.obj} if start == "fork" else {}
    ranks = _Ranks(start, _Group(device, tempfile.mkdtemp(prefix="torchgrade-ddp-"), key[2], start == "fork", known))
    ending = _attempt(ranks, job, deadline, grace)
    if _unknown(ending):  # cannot happen: a new group knows the target it was started for
        ranks.close()
        raise ProbeError(f"the ranks could not find {target.name}")
    return ranks, ending


def _attempt(ranks: _Ranks, job: _Job, deadline: float, grace: float) -> _Ending:
    try:
        return ranks.run(job, deadline, grace)
    except BaseException:
        ranks.close()
        raise


def _unknown(ending: _Ending) -> bool:
    return any(reply.get("unknown_target") for reply in ending.replies.values())


def run_on_ranks(target: Target, scenario: str, args: tuple, kwargs: dict, options: dict, device: str = "cpu",
                 deadline: float | None = None, grace: float = GRACE_S, start: str | None = None) -> Any:
    """Run `scenario` on WORLD_SIZE ranks; return each rank's value (a list), or the first exception raised.

    Raises ProbeError, saying which rank and how, when a rank crashes, hangs or breaks the probe.
    """
    start = start or start_method(device)
    if deadline is None:
        deadline = DEADLINE_S if start == "fork" else SERVER_DEADLINE_S
    code = getattr(target.obj, "__code__", None)
    own_dir = os.path.dirname(code.co_filename) + os.sep if code is not None else None
    module = sys.modules.get(getattr(target.obj, "__module__", None) or "")
    locator = (module.__name__, module.__file__) if getattr(module, "__file__", None) else None
    if start != "fork" and locator is None:
        raise ProbeError(f"{target.name} must be defined in its module: on {device} the ranks do not "
                         "inherit this process, they import the module afresh")
    if getattr(module, target.name, None) is not target.obj:
        locator = None if start == "fork" else locator  # found by identity only
    job = _Job(scenario, wire.encode((list(args), kwargs, options)), target.name, id(target.obj), locator,
               target.calls is not None)
    linetrace.ran_elsewhere()  # the audit's coverage does not see the ranks' lines
    key = (device, start, deadline + GROUP_TIMEOUT_MARGIN_S)
    ranks, ending = _run(job, key, target, start, device, deadline, grace)
    try:
        if ending.hung:
            ranks.dump_stacks(ending.hung)
        stuck = {r: _stuck_at(ranks.group.file(r, "stack"), own_dir) for r in ending.hung}
        stderr = {r: _tail(ranks.group.file(r, "err")) for r in range(WORLD_SIZE)}
    finally:
        if ending.in_step():
            _keep(key, ranks)
        else:
            ranks.close()
    for reply in ending.replies.values():
        _merge_calls(target, reply)
    if target.calls is not None:  # in the sandbox: what the ranks printed on stderr joins the worker's output
        for text in stderr.values():
            if text:
                print(text, file=sys.stderr)
    return _verdict(target.name, ending, stuck, stderr, deadline, grace)


def _verdict(name: str, ending: _Ending, stuck: dict[int, str], stderr: dict[int, str], deadline: float,
             grace: float) -> Any:
    for rank, code in sorted(ending.died.items()):
        text = f"rank {rank} {describe_exit(code, name)}; the other rank was stopped."
        if stderr.get(rank):
            text += f"\nwhat rank {rank} printed last:\n{stderr[rank]}"
        raise ProbeError(text)
    for rank, reply in sorted(ending.replies.items()):
        if "probe_error" in reply:
            raise ProbeError(f"on rank {rank}: {reply['probe_error']}")
        if "raised" in reply:
            error = dict(reply["raised"])
            error["message"] = f"on rank {rank}: {error.get('message', '')}"
            return error
    if ending.hung:
        where = "".join(f"; rank {r} was waiting at {stuck[r]}" for r in ending.hung if stuck.get(r))
        ranks = " and ".join(f"rank {r}" for r in ending.hung)
        if ending.replies:
            done = " and ".join(f"rank {r}" for r in sorted(ending.replies))
            raise ProbeError(
                f"{name} hung: it had not returned on {ranks} {grace:g} s after it returned on {done}, so "
                f"{ranks} was stopped{where}. This is a deadlock: a collective (all_reduce, broadcast, ...) that "
                "one rank calls and the other does not waits forever. Every rank must make the same collectives "
                "in the same order.")
        raise ProbeError(
            f"{name} hung: it had not returned on any rank after {deadline:g} s, so every rank was stopped{where}. "
            "Either the ranks wait for each other in different collectives (a deadlock: every rank must make "
            "the same collectives in the same order), or the code loops forever.")
    return [ending.replies[rank]["value"] for rank in range(WORLD_SIZE)]


# --- the probes ----------------------------------------------------------------------------------

def _by_rank(values: list[dict], key: str) -> dict:
    return {f"rank {rank}": value[key] for rank, value in enumerate(values)}


def _same(a: Any, b: Any) -> bool:
    """Whether two ranks' results agree (up to float rounding)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (a.shape == b.shape and a.dtype == b.dtype and a.device.type == b.device.type
                and torch.allclose(a.cpu(), b.cpu(), rtol=1e-6, atol=1e-9, equal_nan=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 + 1e-6 * abs(a)
    return type(a) is type(b) and a == b


def _on_every_rank(values: list[dict], key: str) -> bool:
    return all(_same(values[0][key], v[key]) for v in values[1:])


def _limits(options: dict) -> dict:
    return {k: options.pop(k) for k in ("deadline", "grace", "start") if k in options}


@probe(standin=RANKS_ELSEWHERE)
def ddp_broadcast(target: Target, args: tuple, kwargs: dict, device: str = "cpu", **options: Any) -> Any:
    """``target(model, *args[1:])`` on every rank, each rank's model ``args[0]`` built from seed + rank.

    Reports whether every rank holds the same parameters and buffers, then per rank: those
    parameters and buffers, whether each parameter is still the same tensor object (so an optimizer
    built before keeps updating it), and each parameter's requires_grad.
    """
    limits = _limits(options)
    values = run_on_ranks(target, "broadcast", args, kwargs, options, device, **limits)
    if isinstance(values, dict):
        return values
    return {"same_on_every_rank": _on_every_rank(values, "parameters_and_buffers"),
            **{key: _by_rank(values, key) for key in ("parameters_and_buffers", "parameters_kept", "requires_grad")}}


@probe(standin=RANKS_ELSEWHERE)
def ddp_average(target: Target, args: tuple, kwargs: dict, device: str = "cpu", **options: Any) -> Any:
    """``target(model)`` on identical replicas of ``args[0]`` whose gradients differ per rank.

    Reports whether every rank holds the same gradients, then each rank's gradients (None where a
    parameter had none).
    """
    limits = _limits(options)
    values = run_on_ranks(target, "average", args, kwargs, options, device, **limits)
    if isinstance(values, dict):
        return values
    return {"same_on_every_rank": _on_every_rank(values, "gradients"), "gradients": _by_rank(values, "gradients")}


@probe(standin=RANKS_ELSEWHERE)
def ddp_train(target: Target, args: tuple, kwargs: dict, device: str = "cpu", **options: Any) -> Any:
    """``args = (model, batch, loss, optimizer)`` by name; identical replicas call the target `steps` times.

    Reports whether every rank returned the same losses and holds the same parameters, then per
    rank: the loss each call returned, and the parameters and buffers after the last call. Option
    ``report``: ``"losses"`` or ``"parameters"`` keeps only those facts, so that a check about one
    does not fail for the other (one claim per check).
    """
    report = options.pop("report", "all")
    limits = _limits(options)
    values = run_on_ranks(target, "train", args, kwargs, options, device, **limits)
    if isinstance(values, dict):
        return values
    losses = {"same_losses_on_every_rank": _on_every_rank(values, "losses"), "losses": _by_rank(values, "losses")}
    parameters = {"same_on_every_rank": _on_every_rank(values, "parameters_and_buffers"),
                  "parameters_and_buffers": _by_rank(values, "parameters_and_buffers")}
    if report == "losses":
        return losses
    if report == "parameters":
        return parameters
    return {"same_losses_on_every_rank": losses["same_losses_on_every_rank"],
            "same_on_every_rank": parameters["same_on_every_rank"],
            "losses": losses["losses"], "parameters_and_buffers": parameters["parameters_and_buffers"]}


@probe(standin=RANKS_ELSEWHERE)
def ddp_wrap(target: Target, args: tuple, kwargs: dict, device: str = "cpu", **options: Any) -> Any:
    """``target(model, *args[1:])`` on every rank (models from seed + rank), then `steps` of SGD through it.

    Options: ``batch`` (inputs, labels), ``loss``, ``steps``, ``lr``, ``seed``. Reports per rank the
    wrapper's type, whether it wraps the given model and its device_ids, then whether every rank
    holds the same parameters, each rank's local losses and its parameters and buffers.
    """
    limits = _limits(options)
    values = run_on_ranks(target, "wrap", args, kwargs, options, device, **limits)
    if isinstance(values, dict):
        return values
    return {**{key: _by_rank(values, key) for key in ("wrapper_type", "wraps_the_model", "device_ids")},
            "same_on_every_rank": _on_every_rank(values, "parameters_and_buffers"),
            "losses": _by_rank(values, "losses"), "parameters_and_buffers": _by_rank(values, "parameters_and_buffers")}


# A ddp_* probe passes its options on to its scenario: documented from the scenario's signature (docs/probes.md).
for _probe, _scenario in ((ddp_broadcast, "broadcast"), (ddp_average, "average"), (ddp_train, "train"), (ddp_wrap, "wrap")):
    _probe.options_from = SCENARIOS[_scenario]


# --- a fork server forked, not started afresh ----------------------------------------------------

#: The limits a rank server takes from the process that forked it, once that process has them.
_HANDED_LIMITS = ("RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC")


def fork_rank_server() -> Callable[[], None] | None:
    """Fork multiprocessing's fork server from this process, now, instead of letting it start a fresh
    Python later: for a sandbox worker on a machine with a GPU, called before the worker starts CUDA.

    Ranks on such a machine come from a fork server (see `start_method`), which multiprocessing starts by
    running a new Python that imports torch and torch._dynamo: on a GPU machine that was most of the 30 s
    the data-parallel module took per submission. A fork of the worker taken before CUDA has started
    (and before any backward) has torch imported and can fork ranks that use CUDA; it serves the
    same protocol (`multiprocessing.forkserver.main`), so ranks are started exactly as before.

    It takes the worker's resource limits (which the worker can only set after starting CUDA) before it
    forks any rank: call the function returned once the worker has its limits. If the worker dies
    first, the server exits. None where this Python's multiprocessing is not the one this was written
    against (the usual fork server is then started when needed)."""
    import socket
    from multiprocessing import connection, forkserver, resource_tracker, util

    server = forkserver._forkserver
    known = ("_forkserver_address", "_forkserver_alive_fd", "_forkserver_pid", "_lock")
    if not sys.platform.startswith("linux") or not all(hasattr(server, a) for a in known) \
            or hasattr(server, "_forkserver_authkey") or server._forkserver_pid is not None:
        return None
    import resource

    resource_tracker.ensure_running()
    address = connection.arbitrary_address("AF_UNIX")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(address)
    if not util.is_abstract_socket_namespace(address):
        os.chmod(address, 0o600)
    listener.listen()
    alive_r, alive_w = os.pipe()
    limits_r, limits_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server
        try:
            os.close(alive_w)
            os.close(limits_w)
            _die_with_parent()
            keep = {0, 1, 2, listener.fileno(), alive_r, limits_r}
            for name in os.listdir("/proc/self/fd"):  # nothing of the worker's (its socket to the host)
                if int(name) not in keep:
                    with contextlib.suppress(OSError):
                        os.close(int(name))
            handed = b""
            while chunk := os.read(limits_r, 4096):
                handed += chunk
            if not handed:  # the worker died before it had its limits: serve nothing
                os._exit(0)
            for line in handed.decode().splitlines():
                kind, soft, hard = line.split()
                resource.setrlimit(getattr(resource, kind), (int(soft), int(hard)))
            os.close(limits_r)
            forkserver.main(listener.fileno(), alive_r, [])
        finally:
            os._exit(0)
    os.close(alive_r)
    os.close(limits_r)
    listener.close()
    with server._lock:
        server._forkserver_address = address
        server._forkserver_alive_fd = alive_w
        server._forkserver_pid = pid

    def hand_limits() -> None:
        lines = [f"{kind} {' '.join(map(str, resource.getrlimit(getattr(resource, kind))))}"
                 for kind in _HANDED_LIMITS if hasattr(resource, kind)]
        os.write(limits_w, "\n".join(lines).encode())
        os.close(limits_w)

    return hand_limits
