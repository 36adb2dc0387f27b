"""`torchgrade check --watch`: a save re-grades the module that changed, and only that one."""

import os
import signal
import subprocess
import sys
import time

from torchgrade.engine.watch import Watcher

from conftest import ROOT, make_submission, points_by_target

BROKEN_GATHER = ("def gather(x, dim, index):\n    return x\n")


def test_a_changed_module_is_graded_again_and_the_others_keep_their_results(assignment, tmp_path):
    folder = make_submission(tmp_path / "mine")
    watcher = Watcher(assignment, folder, device="cpu", only=("tensors", "devices"))
    try:
        first = watcher.grade()
        assert set(first.exercises) == {"tensors", "devices"}
        assert first.whole.score == first.whole.max_score == 25
        assert watcher.changed() == []

        os.utime(folder / "devices.py")  # saved without a change: nothing to do
        assert watcher.changed() == []

        with open(folder / "tensors.py", "a") as f:
            f.write("\n\n" + BROKEN_GATHER)
        assert watcher.changed() == ["tensors"]
        again = watcher.grade(watcher.changed())
        assert again.exercises == ("tensors",)
        assert {t.exercise for t in again.changed.tests} == {"tensors"}  # devices was not run again
        points = points_by_target(again.whole)
        assert points["tensors.gather"][0] == 0 and points["devices.to_device"] == (2, 2)
        assert again.whole.score == 25 - 3
        assert watcher.changed() == []
    finally:
        watcher.close()


def test_a_module_that_appears_later_is_graded_when_it_does(assignment, tmp_path):
    folder = make_submission(tmp_path / "mine", drop=("devices",))
    watcher = Watcher(assignment, folder, device="cpu", only=("devices",))
    try:
        assert watcher.grade().whole.score == 0
        (folder / "devices.py").write_text((ROOT / "reference" / "devices.py").read_text())
        assert watcher.changed() == ["devices"]
        assert watcher.grade(["devices"]).whole.score == 3
    finally:
        watcher.close()


def _wait_for(process: subprocess.Popen, text: str, seen: list[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"{text!r} never came; the output was:\n{''.join(seen)}")


def test_the_command_prints_one_summary_line_and_the_failures_per_save(tmp_path):
    folder = make_submission(tmp_path / "mine")
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCHGRADE_LANG="en")
    process = subprocess.Popen([sys.executable, "-m", "torchgrade.cli", "check", "tensors", "--watch", "--device",
                                "cpu", "--path", str(folder), "--report", str(tmp_path / "report")],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               stdin=subprocess.DEVNULL)
    seen: list[str] = []
    try:
        _wait_for(process, "watching", seen)
        assert any("score: 22 / 22" in line for line in seen)
        with open(folder / "tensors.py", "a") as f:
            f.write("\n\n" + BROKEN_GATHER)
        _wait_for(process, "tensors.py: 19 / 22 in", seen)
        assert "total 19 / 22 (86%)" in seen[-1]
        assert any("✗ gather" in line for line in seen) and any("FAILED" in line for line in seen)  # as check shows it
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()
    assert "Traceback" not in "".join(seen) + process.stdout.read()
