"""The hostile-submission corpus: each attack is a copy of the reference with one file of this folder appended.

``ATTACKS`` says, for each, which targets it attacks (they must score zero), which untouched
targets are graded beside them (they must keep full marks), and the weakest isolation level that
holds against it (``torchgrade.sandbox.isolation.LEVELS``). ``tests/test_hostile.py`` grades each one
and also checks that nothing appears where it should not and nothing it started survives.
``kit.py`` is the attackers' toolbox, copied into every hostile submission as ``hostile_kit.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent
UNTOUCHED = ("tensors.broadcast_shape", "conv.conv_output_size")


@dataclass(frozen=True)
class Attack:
    """One hostile submission: the reference, with `<name>.py` of this folder appended to `<module>.py`."""

    name: str
    #: Targets that must score zero; an exercise name alone means all of its targets.
    attacked: tuple[str, ...]
    module: str = "tensors"
    #: Graded beside them; they must keep full marks.
    untouched: tuple[str, ...] = UNTOUCHED
    #: The weakest isolation level that holds against this attack.
    level: str = "process"
    #: Words that the failures of the attacked targets show (at least one of them).
    message: str = ""
    #: Extra files of the submission (name, text), and symlinks (name, path relative to the project).
    files: tuple[tuple[str, str], ...] = ()
    symlinks: tuple[tuple[str, str], ...] = ()
    #: Run at isolation level "process", the attack succeeds (the attacked targets get full marks):
    #: proof that it is real, and that the stronger level is what stops it.
    works_unisolated: bool = False
    #: Checks of the attacked targets (words of their names) that the attack's own code answers rightly
    #: without the forbidden call: where its forbidden call lands between two watches (a thread's timing,
    #: under load), no watch sees it and these keep their points, earned; every other check still fails.
    honest: tuple[str, ...] = ()
    #: Text (followed by the arena's nonce) that the attack prints or raises only in hidden checks: it
    #: must be in the instructor's copy and nowhere in the student's; `shown` is its visible checks' own.
    secret: str = ""
    shown: str = ""
    #: Its forbidden calls in hidden checks are made from lines it numbered after the nonce (`line_mark`): that
    #: "line <mark>" must be in the instructor's copy and nowhere in the student's.
    secret_lines: bool = False

    @property
    def code(self) -> str:
        return (CORPUS / f"{self.name}.py").read_text()

    @staticmethod
    def line_mark(nonce: str) -> str:
        """The first digits of the line numbers an attack with `secret_lines` chose (tests/hostile/print_hidden_inputs.py)."""
        return f"line {int(nonce[:5], 16) + 1_000_000}"

    @property
    def only(self) -> tuple[str, ...]:
        return self.attacked + tuple(t for t in self.untouched if t not in self.attacked)


_EVIL_FILE = ("ev<script>il.py", "def boom():\n    raise ValueError(\"<script>alert('exception')</script>\")\n")

ATTACKS = (
    # Scoring: nothing the submission does in its own process decides a verdict.
    Attack("patch_comparisons", ("tensors.gather",)),
    Attack("patch_builtins", ("tensors.gather",)),
    Attack("fake_summary", ("tensors.gather",)),
    Attack("tensor_subclass", ("tensors.gather",), message="tensor subclass"),
    Attack("pickle_payload", ("tensors.gather",), message="not plain data"),
    Attack("nan_inf", ("conv.corr2d", "conv.pool2d"), module="conv"),
    Attack("fake_grad_fn", ("functions.Exp",), module="functions"),
    # Hiding a forbidden call from the recorder: names built at run time, torch's modes switched off,
    # another thread, autograd's engine run inside a backward, the profiler switched off.
    Attack("hidden_calls_conv", ("conv.corr2d", "conv.pool2d"), module="conv", message="at torch's dispatcher"),
    Attack("hidden_calls_tensors", ("tensors.view", "tensors.gather", "tensors.one_hot"),
           message="at torch's dispatcher"),
    Attack("autograd_in_backward", ("functions.Exp", "functions.GradCoeff", "functions.LegendreP3",
                                    "functions.LinearFn"), module="functions",
           untouched=("functions.Conv2dFn", "functions.legendre_model", *UNTOUCHED), message="forbidden call"),
    # Forbidden means the operation, not its spelling: redispatch, other overloads, private aliases,
    # torch's Python implementations, numpy on the student's tensors.
    Attack("redispatch", ("tensors.view", "tensors.gather", "tensors.scatter_"), message="redispatch"),
    Attack("other_overloads", ("tensors.gather", "tensors.scatter_", "tensors.scatter_add_"), message="forbidden call"),
    Attack("other_overloads_conv", ("conv.corr2d", "conv.pad2d"), module="conv", message="forbidden call"),
    Attack("private_aliases", ("conv.corr2d", "conv.corr2d_multi_in", "conv.corr2d_multi_in_out", "conv.pad2d"),
           module="conv", message="forbidden call"),
    Attack("private_aliases_tensors", ("tensors.view", "tensors.broadcast_to"),
           message="forbidden call"),
    Attack("numpy_does_it", ("tensors.view", "tensors.gather", "tensors.scatter_"), message="numpy"),
    Attack("numpy_through_a_copy", ("tensors.view", "tensors.gather", "tensors.one_hot", "tensors.broadcast_shape"),
           untouched=("tensors.scatter_", "conv.conv_output_size"), message="numpy"),
    Attack("numpy_without_allocating", ("tensors.view", "tensors.broadcast_shape"),
           untouched=("tensors.scatter_", "conv.conv_output_size"), message="numpy"),
    # Everything inside a request window is the target's: torch's own function as the target, code
    # compiled under another file's name, code torch calls back from inside a call the mode saw.
    Attack("builtin_target", ("tensors.view", "tensors.gather", "tensors.broadcast_to", "tensors.scatter_",
                              "tensors.one_hot"), message="forbidden call"),
    Attack("compiled_elsewhere", ("conv.corr2d", "conv.pad2d", "conv.pool2d"), module="conv", message="forbidden call"),
    Attack("inside_a_seen_call", ("tensors.view", "tensors.gather", "tensors.scatter_"), message="forbidden call"),
    Attack("forged_set_aside", ("tensors.gather",), message="incomplete reply"),
    # No excuse the student can shape: a callback built of C builtins (no Python frame), autograd in a
    # thread the student started.
    Attack("frameless_callbacks", ("tensors.view", "tensors.gather", "tensors.scatter_", "tensors.one_hot"),
           message="forbidden call"),
    Attack("saved_tensor_hooks", ("tensors.one_hot",), message="forbidden call",
           honest=("empty result for empty labels", "for invalid labels")),
    Attack("saved_tensor_hooks_at_import", ("tensors",), message="forbidden call"),
    Attack("saved_tensor_hooks_torch_python", ("tensors.one_hot",), message="forbidden call",
           honest=("empty result for empty labels", "for invalid labels")),
    Attack("saved_tensor_hooks_torch_closure", ("tensors.one_hot",), message="forbidden call",
           honest=("empty result for empty labels", "for invalid labels")),
    Attack("node_prehook", ("tensors.view", "tensors.one_hot"), message="forbidden call"),
    Attack("hook_attributes", ("tensors.view", "tensors.gather", "tensors.scatter_"), message="forbidden call"),
    Attack("node_hook_registry", ("tensors.view",), message="forbidden call"),
    Attack("installed_state", ("tensors.one_hot", "tensors.gather"), message="forbidden call"),
    Attack("named_as_torchs_node", ("tensors.one_hot", "tensors.gather"), message="forbidden call"),
    Attack("thread_autograd", ("functions.Exp", "functions.GradCoeff", "functions.LegendreP3", "functions.LinearFn"),
           module="functions", untouched=("functions.Conv2dFn", "functions.legendre_model", *UNTOUCHED),
           message="forbidden call"),
    # A verdict is about the run whose result was compared: a watch's record lost with its worker is never
    # made good by a second run that answers otherwise.
    Attack("lost_verdict", ("tensors.gather",), untouched=("tensors.one_hot", *UNTOUCHED), message="forbidden call"),
    Attack("imitate_grader_errors", ("tensors.view", "tensors.gather", "tensors.one_hot", "tensors.scatter_"),
           message="a run without your code does not have", honest=("raises type error",)),
    Attack("forge_markers", ("tensors.view", "tensors.gather"), message="may not switch off the grader's call recorder"),
    # (its placeholder answers the label checks honestly: where the filling thread runs only after every watch,
    # on a loaded machine, no forbidden call is seen and those checks keep their points, as a stub's would)
    Attack("fill_after_watch", ("tensors.one_hot",),
           honest=("empty result for empty labels", "for invalid labels", "leaves the labels unchanged")),
    Attack("switch_off_recorder", ("tensors.broadcast_to", "tensors.scatter_", "tensors.one_hot"),
           message="may not switch off the grader's call recorder"),
    Attack("clear_callbacks", ("tensors.view", "tensors.gather"),
           message="may not switch off the grader's call recorder"),
    Attack("switch_after_a_lazy_import", ("tensors.broadcast_to",), message="expand"),
    # Crashing or leaving: each costs only the attacked target (or, at import, the module).
    Attack("exit_at_import", ("tensors",), untouched=("conv.conv_output_size",), message="SystemExit"),
    Attack("os_exit_in_function", ("tensors.gather",), message="exited with status 0"),
    Attack("segfault", ("tensors.gather",), message="SIGSEGV"),
    Attack("deep_recursion", ("tensors.gather",)),
    Attack("kill_parent", ("tensors.gather",)),
    Attack("kill_everything", ("tensors.gather",), level="unprivileged-user"),
    Attack("trap_another_target", ("tensors.gather",)),
    # Limits: time, signals, memory, processes, output.
    Attack("infinite_loop", ("tensors.one_hot",), message="timed out"),
    Attack("ignore_signals", ("tensors.one_hot",), message="timed out"),
    Attack("import_hang", ("tensors",), untouched=("conv.conv_output_size",), message="importing tensors.py took longer"),
    Attack("memory_bomb", ("tensors.gather",)),
    Attack("fork_bomb", ("tensors.gather",)),
    Attack("fork_bomb_spills", ("data.make_loader",), module="data",
           untouched=("parallel.shard", "parallel.broadcast_parameters", "tensors.broadcast_shape")),
    Attack("lingering_processes", ("tensors.gather",)),
    Attack("output_flood", ("tensors.gather",)),
    Attack("long_names", ("modules.MyLayer",), module="modules", message="unexpected"),
    Attack("huge_preview", ("tensors.broadcast_shape",), untouched=("conv.conv_output_size", "tensors.gather"),
           message="Tensor"),
    # Reaching out: files, other processes, the network, the report.
    Attack("write_results", ("tensors.gather",), level="unprivileged-user"),
    Attack("print_hidden_inputs", ("tensors.gather",), secret="HIDDEN-INPUT-", shown="VISIBLE-INPUT-", secret_lines=True),
    Attack("html_injection", ("tensors.gather",), files=(_EVIL_FILE,)),
    Attack("symlink_to_reference", ("tensors.gather",), symlinks=(("helper.py", "reference/tensors.py"),)),
    Attack("read_secrets", ("tensors.gather",), level="unprivileged-user", works_unisolated=True),
    Attack("steal_reference", ("tensors.gather",), level="bwrap", works_unisolated=True),
    Attack("read_hidden_checks", ("tensors.gather",), level="bwrap", works_unisolated=True),
    Attack("use_network", ("tensors.gather",), level="bwrap", works_unisolated=True),
    # Leaving something for the next submission where no folder is: shared memory, semaphores, queues.
    Attack("shared_memory", ("tensors.gather",)),
    Attack("keyring_message", ("tensors.gather",)),
)
