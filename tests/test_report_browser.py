"""The report page in a real browser: headless Chromium loads it offline, with no console errors;
failures are open, passes folded, a click expands and collapses, and a screenshot is saved."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from torchgrade.engine.grading import grade_submission
from torchgrade.outputs.report import write_report

from conftest import make_submission

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--mute-audio",
         "--hide-scrollbars", "--remote-debugging-pipe")


class DevTools:
    """The Chrome DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out; NUL-separated JSON)."""

    def __init__(self, profile: Path):
        to_chrome, self._write = os.pipe()
        self._read, from_chrome = os.pipe()
        # Above 9 first, so that putting them at 3 and 4 in the child cannot overwrite one with the other.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome, from_chrome)]
        os.close(to_chrome)
        os.close(from_chrome)

        def at_3_and_4() -> None:
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        preexec_fn=at_3_and_4, close_fds=False, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in high:
            os.close(fd)
        self._buffer = b""
        self._next = 0
        self.events: list[dict] = []
        self.session: str | None = None

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, timeout: float = 20.0, **params) -> dict:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._message(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the element (scrolled into view first)."""
        box = self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: "center"}}); const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(" ".join(str(a.get("value")) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(params["entry"].get("text", ""))
        return found

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)
        os.close(self._read)


@pytest.fixture(scope="module")
def report(assignment, tmp_path_factory) -> Path:
    """The report of a submission that passes some checks, fails others, raises and prints."""
    folder = make_submission(tmp_path_factory.mktemp("sub") / "student", append={"tensors": """
        def one_hot(labels, num_classes):
            print("one_hot got", labels.tolist())
            out = torch.zeros(labels.shape[0], num_classes)
            out[torch.arange(labels.shape[0]), labels] = 1
            return out

        def gather(x, dim, index):
            raise ValueError(f"no gather along {dim}")
    """})
    grade = grade_submission(folder, assignment, device="cpu", only=("tensors.one_hot", "tensors.gather",
                                                                      "tensors.broadcast_shape"))
    path = tmp_path_factory.mktemp("report") / "report.html"
    write_report(grade, assignment, path)
    from torchgrade.engine.scoring import points_text as _fmt

    (path.parent / "score.txt").write_text(f"{_fmt(grade.score)} / {_fmt(grade.max_score)}")  # as the page shows it
    return path


@pytest.fixture
def browser(tmp_path):
    devtools = DevTools(tmp_path / "profile")
    try:
        page = next(t for t in devtools.send("Target.getTargets")["targetInfos"] if t["type"] == "page")
        devtools.session = devtools.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            devtools.send(f"{domain}.enable")
        devtools.send("Emulation.setDeviceMetricsOverride", width=1100, height=1500, deviceScaleFactor=1, mobile=False)
        yield devtools
    finally:
        devtools.close()


def test_the_report_opens_offline_without_errors_and_its_sections_fold(browser, report, tmp_path):
    browser.send("Page.navigate", url=report.as_uri())
    browser.wait_for("Page.loadEventFired")
    score = (report.parent / "score.txt").read_text()
    assert browser.evaluate("document.getElementById('score').textContent.trim()").startswith(score)
    assert browser.evaluate("document.querySelectorAll('#overview .exercise-row').length") == 1

    # Failures are open; the lists of all checks (passes included) are folded.
    failures = browser.evaluate("Array.from(document.querySelectorAll('details.failure')).map(d => d.open)")
    assert failures and all(failures)
    assert browser.evaluate("document.querySelectorAll('details.all-checks[open]').length") == 0
    assert browser.evaluate("document.querySelector('details.failure .hint').offsetHeight") > 0
    assert browser.evaluate("document.querySelector('.printed pre').textContent").startswith("one_hot got [")

    # A click on a folded list opens it; a click on a failure's summary closes it.
    target = "#target-tensors-broadcast_shape details.all-checks > summary"
    browser.click(target)
    assert browser.evaluate(f"document.querySelector({json.dumps(target)}).parentElement.open") is True
    assert browser.evaluate("document.querySelector('#target-tensors-broadcast_shape li').offsetHeight") > 0
    browser.click("details.failure > summary")
    assert browser.evaluate("document.querySelector('details.failure').open") is False
    browser.click("button[data-toggle-all=open]")
    assert browser.evaluate("Array.from(document.querySelectorAll('details')).every(d => d.open)") is True
    browser.click("button[data-toggle-all=close]")
    assert browser.evaluate("Array.from(document.querySelectorAll('details')).some(d => d.open)") is False
    browser.click("button[data-toggle-all=open]")

    shot = browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    path = tmp_path / "report.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.stat().st_size > 10_000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    destination = os.environ.get("TORCHGRADE_SCREENSHOTS")  # keep it for a person to look at
    if destination:
        Path(destination).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(destination) / "report.png")
    assert browser.errors() == []


# --- pages everyone can use: narrow screens, the keyboard, contrast (axe-core) ---

ROOT = Path(__file__).resolve().parent.parent
#: axe-core, as .ci/run installs it from npm (or where TORCHGRADE_AXE points).
AXE = Path(os.environ.get("TORCHGRADE_AXE", ROOT / ".ci" / "node" / "node_modules" / "axe-core" / "axe.min.js"))
PHONE = 390


@pytest.fixture(scope="module")
def overview(assignment, tmp_path_factory) -> Path:
    """A class overview for the whole course: long names, every exercise a column, some errors."""
    from torchgrade.classroom.batch import write_class_pages
    from torchgrade.engine.scoring import CheckResult, Grade, assign_points

    grades = []
    for i, name in enumerate(["ann", "ben", "a-student-with-a-very-long-submission-folder-name_12345_67890", "dora"]):
        tests = [CheckResult(nodeid=f"{t.qualname}::test[cpu]", name=f"{t.qualname}: matches the reference [cpu]",
                             exercise=t.exercise, target=t.name, device="cpu", visibility="visible",
                             status=("passed", "failed", "error")[(i + j) % 3] if i else "passed",
                             output="expected 1, got 2")
                 for j, t in enumerate(assignment.targets)]
        assign_points(tests, assignment)
        grades.append(Grade(name, tests, devices=["cpu"]))
    grades[1].adjustments = [{"scope": "target tensors.view", "reason": "shown working in the lab", "automatic": 0.0,
                              "points": 4.0, "max_score": 4.0, "review": "the submission changed since this decision"}]
    folder = tmp_path_factory.mktemp("class")
    (folder / "similarity.html").write_text("")  # the index links to it
    write_class_pages(grades, assignment, folder)
    return folder / "index.html"


@pytest.fixture(scope="module")
def similarity(assignment, tmp_path_factory) -> Path:
    """The similarity page of tests/near_copies.py's class (independent solutions, disguised copies, copies of the
    reference) and a student with a long name who kept the stubs; the code of 12 targets shown."""
    from near_copies import disguised_class

    from torchgrade.classroom import similarity as sim

    names = tuple(e.name for e in assignment.exercises)
    students, _, _ = disguised_class(ROOT / "tests" / "fairness", assignment)
    students["a-student-with-a-very-long-submission-folder-name_12345_67890"] = sim.modules(assignment.stubs_dir, names)
    report = sim.analyse(students, assignment, {"reference": sim.modules(assignment.reference_dir, names)})
    path = tmp_path_factory.mktemp("similarity") / sim.PAGE
    path.write_text(sim.render(report, assignment, {name: f"{name}/report.html" for name in students}, most=12,
                               blocks=12))
    return path


@pytest.fixture(scope="module")
def notebook_check(tmp_path_factory) -> Path:
    """What the in-notebook check shows in a cell: a failure's long message and its rerun line."""
    from torchgrade.notebook import Verdicts

    name = "tensors.view: matches the reference on a transposed input of many elements [cpu]"
    rerun = "%torchgrade check tensors.view::test_matches_the_reference_on_a_transposed_input_of_many_elements --device cpu"
    rows = [{"name": name, "status": "failed", "score": 0.0, "max_score": 1.0,
             "output": "called: view(float32 tensor of shape (2, 3) = [[0., 1., 2.], [3., 4., 5.]], 3, 2)\n"
                       "the result: expected (3, 2), got (2, 3)\n"
                       'File "tensors.ipynb", cell 4, line 3, in view'},
            {"name": "tensors.view: keeps the dtype [cpu]", "status": "passed", "score": 1.0, "max_score": 1.0}]
    shown = Verdicts(rows=rows, text="", status=1, score=1.0, max_score=2.0, reruns={name: rerun})._repr_html_()
    path = tmp_path_factory.mktemp("notebook") / "cell.html"
    path.write_text('<!doctype html><html lang="en"><meta charset="utf-8"><meta name="viewport" '
                    f'content="width=device-width"><title>a check cell</title><body>{shown}</body></html>',
                    encoding="utf-8")
    return path


def _open(browser, path: Path, width: int = 1100) -> None:
    browser.send("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=width < 600)
    browser.send("Page.navigate", url=path.as_uri())
    browser.wait_for("Page.loadEventFired")


@pytest.mark.parametrize("page", ["report", "overview", "similarity", "notebook_check"])
def test_the_pages_fit_a_390_pixel_phone(browser, page, request):
    _open(browser, request.getfixturevalue(page), PHONE)
    browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert browser.evaluate("document.documentElement.scrollWidth") <= PHONE
    # Scores and rerun commands lie inside the screen, or inside a table that scrolls in its own box.
    outside = browser.evaluate(f"""Array.from(document.querySelectorAll('.num, .pts, .score, .rerun code'))
        .filter(e => !e.closest('.table-wrap') && e.getBoundingClientRect().right > {PHONE} + 0.5)
        .map(e => e.className + ': ' + e.textContent.trim().slice(0, 40))""")
    assert outside == []
    broken = browser.evaluate("""Array.from(document.querySelectorAll('.pts')).filter(e => {
        const range = document.createRange(); range.selectNodeContents(e);
        return new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size > 1; })
        .map(e => e.textContent.trim())""")
    assert broken == [], "a score broken over lines"
    assert browser.errors() == []


def test_the_similarity_page_leads_with_the_pairs_and_its_line_numbers_stay_narrow(browser, similarity, assignment,
                                                                                 tmp_path):
    from torchgrade.classroom import similarity as sim

    _open(browser, similarity, 1280)
    # the ranked pairs start on the first screen, the first pair a copying one
    assert browser.evaluate("document.querySelector('table').getBoundingClientRect().top") < 900
    first = browser.evaluate("document.querySelector('table tbody tr').textContent")
    assert "ref-copy" in first or "copy-of-" in first
    shot = browser.send("Page.captureScreenshot", format="png")
    destination = os.environ.get("TORCHGRADE_SCREENSHOTS")  # keep it for a person to look at (docs/similarity.png)
    if destination:
        Path(destination).mkdir(parents=True, exist_ok=True)
        (Path(destination) / "similarity.png").write_bytes(base64.b64decode(shot["data"]))
    assert browser.errors() == []

    # Code narrower than its box: the line numbers keep to their own width (the table, stretched to the box,
    # once spread its extra width over them too).
    code = sim.modules(assignment.stubs_dir, ("modules",))
    code["modules"] += "\n\nclass MyLayer(nn.Module):\n    def forward(self, x):\n        return x - x.mean()\n"
    page = tmp_path / sim.PAGE
    page.write_text(sim.render(sim.analyse({"ann": code, "ben": code}, assignment, {}), assignment, {}))
    _open(browser, page, 1280)
    numbers = browser.evaluate("Array.from(document.querySelectorAll('.code td.ln')).map(e => e.offsetWidth)")
    box = browser.evaluate("document.querySelector('.code').clientWidth")
    assert numbers and max(numbers) < 60 < box / 4, (numbers, box)


def test_the_students_table_sorts_from_the_keyboard(browser, overview):
    _open(browser, overview)
    # The students' table comes before the checks' item analysis.
    assert browser.evaluate("document.querySelector('#students').compareDocumentPosition("
                            "document.querySelector('svg[aria-label=\"Histogram of scores\"]')) & 4") == 4
    names = "Array.from(document.querySelectorAll('#students tbody tr')).map(r => r.cells[0].textContent.trim())"
    before = browser.evaluate(names)
    for _ in range(40):  # Tab until the score heading has the focus, as a keyboard user would
        browser.send("Input.dispatchKeyEvent", type="keyDown", key="Tab", code="Tab", windowsVirtualKeyCode=9)
        browser.send("Input.dispatchKeyEvent", type="keyUp", key="Tab", code="Tab", windowsVirtualKeyCode=9)
        if browser.evaluate("document.activeElement.textContent.trim()") == "score":
            break
    assert browser.evaluate("document.activeElement.closest('th') !== null")
    for kind in ("keyDown", "keyUp"):
        browser.send("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13,
                     **({"text": "\r"} if kind == "keyDown" else {}))
    assert browser.evaluate("document.activeElement.closest('th').getAttribute('aria-sort')") == "ascending"
    after = browser.evaluate(names)
    assert sorted(after) == sorted(before) and after[-1] == "ann"  # ann has full marks: last going up
    assert browser.errors() == []


@pytest.mark.skipif(not AXE.is_file(), reason=f"axe-core is not installed at {AXE} (.ci/run installs it: npm install "
                                              "--prefix .ci/node axe-core)")
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("page", ["report", "overview", "similarity"])
def test_axe_finds_no_serious_accessibility_violation(browser, page, scheme, request):
    browser.send("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": scheme}])
    _open(browser, request.getfixturevalue(page))
    assert browser.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") is (scheme == "dark")
    browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    browser.send("Runtime.evaluate", expression=AXE.read_text(encoding="utf-8"))
    result = browser.send("Runtime.evaluate", awaitPromise=True, returnByValue=True, timeout=60, expression="""
        axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})
          .then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                             nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))""")
    violations = result["result"]["value"]
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert serious == [], json.dumps(serious, indent=1)
    assert not [v for v in violations if v["id"] == "color-contrast"]
