"""The pytest plugin that turns a folder of checks into a grade: options, devices, fixtures, records."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
import torch

from torchgrade.engine import bounds
from torchgrade.engine import config as config_module
from torchgrade.engine import i18n
from torchgrade.engine.differential import CheckFailed, Differential, ForbiddenCallFailure, GraderError, SubmissionError
from torchgrade.engine.grader_errors import InstallationError
from torchgrade.engine.notebooks import cell_maps, relabel
from torchgrade.sandbox import host
from torchgrade.sandbox import standin
from torchgrade.sandbox.host import Sandbox, isolation_level
from torchgrade.sandbox.probes import ProbeLoadError, load_course
from torchgrade.engine.scoring import CheckResult, Grade, assign_points

DEVICES = ("cpu", "cuda")
DEVICE_HELP = "Devices to grade on: cpu, cuda, or all (default: all that are available)."
grade_key = pytest.StashKey[Grade]()
_state_key = pytest.StashKey["GradingState"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchgrade", "torchgrade grading")
    group.addoption("--submission", metavar="DIR", help="The submission folder to grade (default: the stubs).")
    group.addoption("--assignment", metavar="YAML", help="The assignment file (default: assignment.yaml).")
    group.addoption("--device", choices=("cpu", "cuda", "all"), default="all", help=DEVICE_HELP)
    group.addoption("--target", action="append", default=[], metavar="NAME",
                    help="Only grade this exercise, exercise.target, or one check: exercise.target::test_name "
                         "(repeatable).")
    group.addoption("--lang", choices=i18n.LANGUAGES, default=None, help=i18n.LANG_HELP)
    group.addoption("--results-json", metavar="PATH", help="Also write results.json here.")
    group.addoption("--late-verdicts", action="store_true",
                    help="Where torch's profiler watches for forbidden calls, read what it saw once per module, not "
                         "per check (faster); a check's report may then say passed before its verdict (torchgrade's "
                         "own commands pass it: they show nothing before the grade). Not with -x.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "target(name): the exercise target a check grades")
    if not config.pluginmanager.has_plugin(FailedCheckReports.__name__):
        config.pluginmanager.register(FailedCheckReports(), FailedCheckReports.__name__)
    if config.getoption("--lang"):
        i18n.set_language(config.getoption("--lang"))
    previous = config.stash.get(_state_key, None)  # a batch configures once per submission: same file
    path = config.getoption("--assignment")
    if previous is not None and path and previous.assignment.path == Path(path).resolve():
        assignment = previous.assignment
    else:
        assignment = config_module.load_assignment(path)
    use_course(assignment)
    submission = Path(config.getoption("--submission") or assignment.stubs_dir).resolve()
    config.stash[_state_key] = GradingState(assignment, submission, config.getoption("--device"),
                                            tuple(config.getoption("--target")),
                                            defer=config.getoption("--late-verdicts") and not config.getoption("maxfail", 0))


def use_course(assignment: config_module.Assignment) -> None:
    """Make this course's own parts available: its folder on sys.path (checks import each other as
    modules under it), its probes on both sides of the boundary, the words for its probes' facts."""
    root = str(assignment.root)
    if root not in sys.path:
        sys.path.insert(0, root)
    # Check files are imported by path under names relative to the checks folder (visible.test_x): a
    # module of that name from another course graded earlier in this process would be taken instead.
    checks = str(assignment.checks_dir) + os.sep
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("visible", "hidden") and not (getattr(module, "__file__", None) or "").startswith(checks):
            del sys.modules[name]
    try:
        load_course(assignment.probes_dir)
    except ProbeLoadError as e:
        raise pytest.UsageError(f"the course's probes could not be loaded: {e}") from None
    host.use_course(assignment.probes_dir)
    i18n.use_course_facts(assignment.facts)


class GradingState:
    """What one pytest session grades, and what it has found so far."""

    def __init__(self, assignment: config_module.Assignment, submission: Path, device: str, only: tuple[str, ...],
                 defer: bool = False):
        self.assignment = assignment
        #: A forbidden-call verdict of the profiler's may wait until its module's checks end (Sandbox: `defer`),
        #: not with -x: the first failure stops the run where it happens.
        self.defer = defer
        #: The deferred verdicts of the check running now: (token, what the token's findings make of it).
        self.verdicts: list[tuple[str, Callable[[dict], str | None]]] = []
        #: Recorded checks whose verdicts wait, with those verdicts.
        self.awaiting: list[tuple[CheckResult, list]] = []
        self.submission = submission
        self.device = device
        self.only = only
        self.results: list[CheckResult] = []
        self.started = time.perf_counter()
        self._sandbox: Sandbox | None = None
        #: Whether more than one module may be graded (see Sandbox.warm); a session that knows which
        #: modules its checks are in says so exactly (torchgrade.engine.session).
        self.warm = len({config_module.exercise_named(name) for name in only}) != 1
        #: The modules whose checks it runs (Sandbox.modules): those `only` names, else the assignment's; a session
        #: that knows which modules its checks are in says so exactly (torchgrade.engine.session).
        self.modules = {config_module.exercise_named(name) for name in only} \
            or {exercise.name for exercise in assignment.exercises}
        #: Without CUDA, the CUDA checks run on the stand-in ("score", "warn") or are set aside ("off"):
        #: the course's choice; TORCHGRADE_CUDA_STANDIN overrides it (comparisons, benchmarks).
        policy = os.environ.get("TORCHGRADE_CUDA_STANDIN", "").strip().lower() or assignment.cuda_standin
        self.standin = policy if policy in ("score", "warn") and not torch.cuda.is_available() \
            and device in ("all", "cuda") else ""  # (--device cpu grades no CUDA check, on the stand-in or not)
        #: The modules made from notebooks: their messages name the notebook's cells (torchgrade.notebook).
        self.cells = cell_maps(submission, assignment)

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            # CUDA where it is here, whatever --device says: student code sees the devices the reference
            # sees (a CPU check of pick_device asks torch.cuda.is_available() on both sides)
            cuda = torch.cuda.is_available()
            self._sandbox = Sandbox(self.submission, cuda=cuda, ranks=_distributed(self.assignment) if cuda else frozenset(),
                                    warm=self.warm, defer=self.defer, modules=self.modules)
        return self._sandbox

    def device_skip_reason(self, device: str) -> str | None:
        if self.device not in ("all", device):
            return i18n.t("skip_not_chosen", device=device, chosen=self.device)
        if device == "cuda" and not torch.cuda.is_available() and not self.standin:
            return i18n.t("skip_no_cuda")
        return None

    def on_standin(self, item: pytest.Item) -> bool:
        """Whether this check runs on the CUDA stand-in: a CUDA check where there is no CUDA."""
        return bool(self.standin) and _device(item) == "cuda"

    def graded_devices(self) -> list[str]:
        """The real devices graded on (the stand-in is not one: see `standin`)."""
        return [d for d in DEVICES if self.device_skip_reason(d) is None and not (d == "cuda" and self.standin)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEVICES)


def exercise_of(item: pytest.Item) -> str:
    """The exercise (student module) a check grades: its file's name without test_."""
    return Path(str(item.path)).stem.removeprefix("test_")



def _target(item: pytest.Item) -> str:
    marker = item.get_closest_marker("target")
    if marker is None or not marker.args:
        raise pytest.UsageError(f"{item.nodeid}: a check needs @pytest.mark.target('name')")
    return str(marker.args[0])


def visibility(item: pytest.Item) -> str:
    """Whether a collected check is "visible" or "hidden" (its folder, or its exercise's setting)."""
    return _visibility(item, item.config.stash[_state_key])


def _visibility(item: pytest.Item, state: GradingState) -> str:
    hidden = Path(str(item.path)).parent.name == "hidden"
    try:
        hidden = hidden or state.assignment.exercise(exercise_of(item)).visibility == "hidden"
    except KeyError:
        pass
    return "hidden" if hidden else "visible"


def _display_name(item: pytest.Item) -> str:
    function = getattr(item, "originalname", item.name).removeprefix("test_").replace("_", " ")
    params = dict(getattr(getattr(item, "callspec", None), "params", {}))
    device = params.pop("device", None)
    extra = getattr(getattr(item, "callspec", None), "id", "")
    if device and extra:
        extra = "-".join(p for p in extra.split("-") if p != device)
    name = f"{exercise_of(item)}.{_target(item)}: {function}"
    if extra:
        name += f" ({extra})"
    if device:
        name += f" [{device}]"
    return name


def _selected(item: pytest.Item, only: str) -> bool:
    """Whether `only` (exercise, exercise.target, or exercise.target::test_name[params]) names this check."""
    qualname = f"{exercise_of(item)}.{_target(item)}"
    name, _, check = only.partition("::")
    if not (qualname == name or qualname.startswith(name + ".")):
        return False
    return not check or check in (item.name, getattr(item, "originalname", item.name))


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[_state_key]
    listed = {e.name for e in state.assignment.exercises}
    keep, drop = [], []
    for item in items:  # checks of exercises the assignment does not list are not graded (torchgrade.engine.course)
        wanted = exercise_of(item) in listed and (not state.only or any(_selected(item, o) for o in state.only))
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    # Visible checks first: what the submission prints or answers in them cannot hold a hidden check's
    # inputs, which it has not seen yet (from the first hidden check on, its output is the instructor's).
    items[:] = sorted(keep, key=lambda item: _visibility(item, state) != "visible")


def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.config.stash[_state_key]
    device = _device(item)
    if device is not None:
        reason = state.device_skip_reason(device)
        if reason:
            pytest.skip(reason)


@pytest.fixture
def check(request: pytest.FixtureRequest) -> Differential:
    """Compare the reference and the student's code for this check's target (see torchgrade.engine.differential)."""
    return _differential(request.node)


_CHECK_FUNCTION = check.__wrapped__  # what pytest calls for the fixture above


def _differential(item: pytest.Item) -> Differential:
    state = item.config.stash[_state_key]
    exercise, name = exercise_of(item), _target(item)
    try:
        target = state.assignment.target(exercise, name)
    except KeyError:
        raise pytest.UsageError(f"{item.nodeid}: {exercise}.{name} is not in {state.assignment.path.name}") from None
    return Differential(state.assignment, target, state.submission, state.sandbox, target.forbidden,
                        hidden=_visibility(item, state) == "hidden", check=getattr(item, "originalname", item.name),
                        standin=state.on_standin(item), verdicts=state.verdicts)


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """A CUDA check on the stand-in builds its inputs with it on: device="cuda" makes stand-in tensors."""
    state = pyfuncitem.config.stash.get(_state_key, None)
    with standin.active() if state is not None and state.on_standin(pyfuncitem) else contextlib.nullcontext():
        yield


def _message(excinfo: pytest.ExceptionInfo) -> str:
    error = excinfo.value
    if isinstance(error, (CheckFailed, SubmissionError)):
        return str(error)
    if isinstance(error, AssertionError):
        return str(error) or "assertion failed"
    if isinstance(error, (GraderError, InstallationError)):  # the course's, the engine's or the installation's slip
        return i18n.t("grader_error", error=str(error))
    return i18n.t("grader_error", error=excinfo.exconly())


class FailedCheckReports:
    """A failed check's report carries its message as it is. pytest's own report would first cut and
    filter the Python traceback: a third of the time of grading an unfinished exercise."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport | None:
        error = call.excinfo.value if call.excinfo is not None else None
        if call.when != "call" or not isinstance(error, (CheckFailed, SubmissionError)):
            return None
        sections = [(f"Captured {key} {when}", text) for when, key, text in getattr(item, "_report_sections", [])]
        return pytest.TestReport(item.nodeid, item.location, {name: 1 for name in item.keywords}, "failed",
                                 _message(call.excinfo), "call", sections, call.duration, call.start, call.stop,
                                 user_properties=item.user_properties)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and not report.passed):
        status = "passed"
        text = ""
        if report.skipped:
            status = "skipped"
            text = call.excinfo.value.msg if call.excinfo is not None and hasattr(call.excinfo.value, "msg") else ""
        elif report.failed:
            error = call.excinfo.value
            status = "failed" if isinstance(error, AssertionError) else "error"
            text = _message(call.excinfo)
        forbidden = report.failed and isinstance(call.excinfo.value, ForbiddenCallFailure)
        _record(item, status, text, forbidden, report.duration)


def _device(item: pytest.Item) -> str | None:
    return getattr(getattr(item, "callspec", None), "params", {}).get("device")


_row_key = pytest.StashKey[dict]()


def _record(item: pytest.Item, status: str, text: str, forbidden: bool = False, duration: float = 0.0) -> None:
    state = item.config.stash[_state_key]
    row = item.stash.get(_row_key, None)
    if row is None:  # what names the check is the same in every round of a batch: worked out once
        row = item.stash[_row_key] = dict(
            nodeid=item.nodeid, name=_display_name(item), exercise=exercise_of(item), target=_target(item),
            device=_device(item), visibility=_visibility(item, state))
    result = CheckResult(**row, status=status, duration=duration, standin=state.on_standin(item))
    _outcome(state, result, status, text, forbidden)
    state.results.append(result)
    if state.verdicts:  # its forbidden-call verdict waits for its module's (`settle`)
        state.awaiting.append((result, state.verdicts[:]))
        state.verdicts.clear()


def _outcome(state: GradingState, result: CheckResult, status: str, text: str, forbidden: bool) -> None:
    """A check's status and message, as a student reads them."""
    # Every message is cut to a size (bounds.py), its hint line kept: messages from any path, a course's
    # own assertion or a grader error included.
    if state.cells:  # "tensors.py, line 12" of a module made from a notebook: "tensors.ipynb, cell 7, line 3"
        text = relabel(text, state.cells)
    text = bounds.clip_message(text, keep_last_line=True)
    if result.standin and state.standin == "warn" and status != "skipped":  # findings as warnings: no points either way
        text = i18n.t("standin_warning", text=text) if status != "passed" else i18n.t("standin_not_counted")
        status, forbidden = "skipped", False
    result.status, result.output, result.forbidden = status, text, forbidden


def settle(state: GradingState) -> None:
    """The deferred verdicts: a check whose requests ran a forbidden call unseen by the mode fails as it would
    have failed at once (the first such request's message). A check whose record was lost with its worker
    (a later check of its target crashed, exited or timed out first) fails, and only it: nothing vouches for
    its result, but nothing was found either (an honest loop that never ends is not a forbidden call)."""
    if not state.awaiting or state._sandbox is None:
        return
    findings = state._sandbox.settle()
    for result, verdicts in state.awaiting:
        for token, verdict in verdicts:
            if findings.get(token) == host.LOST_FINDINGS:
                if result.status == "passed":
                    _outcome(state, result, "failed", i18n.t("verdict_lost"), False)
                break
            text = verdict(findings.get(token, {}))
            if text is not None:
                _outcome(state, result, "failed", text, True)
                break
    state.awaiting.clear()


def direct(item: pytest.Item) -> bool:
    """Whether a check can run without pytest's run protocol (`run_direct`): it asks only for `check` and
    for parameters (`device`, `@pytest.mark.parametrize` values), and bears no mark but the target and
    its parameters."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None or not all(mark.name in ("target", "parametrize") for mark in item.iter_markers()):
        return False
    params = getattr(getattr(item, "callspec", None), "params", {})
    for name in item.fixturenames:
        definitions = info.name2fixturedefs.get(name, ())
        own = name == "check" and [d.func for d in definitions] == [_CHECK_FUNCTION]  # not a course's own `check`
        parameter = name in params and all(d.func.__name__ == "get_direct_param_fixture_func" for d in definitions)
        if not (own or parameter or name == "request"):  # (`check` asks for `request`)
            return False
    return True


def run_direct(item: pytest.Item) -> None:
    """Run a `direct` check, recording exactly what pytest's protocol would: its status, message, duration.

    A batch round runs hundreds of checks per submission; pytest's setup, fixture resolution, reports
    and teardown cost more than most checks do (torchgrade.engine.session)."""
    values = dict(getattr(getattr(item, "callspec", None), "params", {}))
    started = time.perf_counter()
    state = item.config.stash[_state_key]
    try:
        values["check"] = _differential(item)
        with standin.active() if state.on_standin(item) else contextlib.nullcontext():
            item.obj(**{name: values[name] for name in item._fixtureinfo.argnames})
    except (KeyboardInterrupt, SystemExit, pytest.exit.Exception):
        raise
    except BaseException as error:  # as pytest's protocol would report the call phase's exception
        duration = time.perf_counter() - started
        excinfo = pytest.ExceptionInfo.from_exception(error)
        if isinstance(error, pytest.skip.Exception):
            _record(item, "skipped", error.msg, duration=duration)
        else:
            _record(item, "failed" if isinstance(error, AssertionError) else "error", _message(excinfo),
                    isinstance(error, ForbiddenCallFailure), duration)
        return
    _record(item, "passed", "", duration=time.perf_counter() - started)


def set_aside_reason(item: pytest.Item) -> str | None:
    """Why a check is not run here (a device not graded), or None. A batch round records these checks
    with `record_skipped` instead of running them: a skip that pytest runs costs what a check does."""
    device = _device(item)
    return item.config.stash[_state_key].device_skip_reason(device) if device is not None else None


def record_skipped(item: pytest.Item, reason: str) -> None:
    _record(item, "skipped", reason)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_state_key, None)
    if state is None:
        return
    if state._sandbox is not None:
        settle(state)
        state._sandbox.close()
    assign_points(state.results, state.assignment)
    notes = [f"graded on: {', '.join(state.graded_devices())}"]
    if state.standin and any(r.standin for r in state.results):
        notes.append(i18n.t("standin_graded", policy=state.standin))
    hidden = []
    if state._sandbox is not None:
        for key, text in state._sandbox.output.items():  # modules as first used; each: import, then targets
            notes.append(f"--- printed by {_module_file(key, state)} ---\n{text.rstrip()}")
        hidden = [f"--- printed by {_module_file(key, state)} ---\n{text.rstrip()}"
                  for key, text in state._sandbox.hidden_output.items()]
    grade = Grade(submission=state.submission.name, tests=state.results,
                  execution_time=round(time.perf_counter() - state.started, 3), output="\n".join(notes),
                  devices=state.graded_devices(), standin=state.standin if any(r.standin for r in state.results) else "",
                  isolation=state._sandbox.isolation if state._sandbox is not None else isolation_level(),
                  watch=state._sandbox.watch if state._sandbox is not None else "",
                  hidden_output="\n".join(hidden),
                  notebooks={exercise: converted.name for exercise, converted in state.cells.items()})
    session.config.stash[grade_key] = grade
    path = session.config.getoption("--results-json")
    if path:
        from torchgrade.engine.results import write_results

        write_results(grade, state.assignment, Path(path))


def _module_file(key: str, state: GradingState) -> str:
    """"attention.py while importing" as "attention.ipynb while importing" for a module made from a notebook."""
    module, space, rest = key.partition(" ")
    if module.endswith(".py") and module[:-3] in state.cells:
        return f"{state.cells[module[:-3]].name}{space}{rest}"
    return key


def _distributed(assignment: config_module.Assignment) -> frozenset[str]:
    """The modules that use torch.distributed, by the reference's source (the stub's in a bundle): their
    workers start their ranks' fork server early (see probes.parallel.fork_rank_server). A module this
    misses still gets its ranks, from a fork server started when first needed."""
    found = set()
    for exercise in assignment.exercises:
        for folder in (assignment.reference_dir, assignment.stubs_dir):
            path = folder / f"{exercise.name}.py"
            if path.is_file():
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    if "torch.distributed" in path.read_text(encoding="utf-8"):
                        found.add(exercise.name)
                break
    return frozenset(found)
