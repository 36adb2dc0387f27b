"""The command line as students and instructors meet it: outputs per the contract, bad input refused."""

import json
import zipfile

import pytest
from click.testing import CliRunner

from torchgrade.cli import main

from conftest import ROOT, make_submission, small_course


@pytest.fixture
def small_assignment(tmp_path):
    """The real reference, checks and stubs, but only two tensors targets: fast to grade."""
    return small_course(tmp_path, {"tensors": {"broadcast_shape": 2, "one_hot": 3}})


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_grade_writes_results_and_reports_for_each_submission(tmp_path, small_assignment):
    out = tmp_path / "out"
    result = run("grade", ROOT / "reference", ROOT / "exercises", "--out", out, "--device", "cpu",
                 "--assignment", small_assignment)
    assert result.exit_code == 0, result.output
    full = json.loads((out / "reference" / "results.json").read_text())
    assert full["score"] == full["extra_data"]["max_score"] == 5
    zero = json.loads((out / "exercises" / "results.json").read_text())
    assert zero["score"] == 0
    test = zero["tests"][0]
    assert set(test) >= {"name", "visibility", "status", "score", "max_score", "output", "extra_data"}
    assert set(test["extra_data"]) >= {"exercise", "target", "device", "outcome"}
    assert {t["visibility"] for t in zero["tests"]} == {"visible", "after_due_date"}  # hidden checks carry points
    assert (out / "reference" / "report.html").is_file()
    assert (out / "index.html").is_file() and (out / "grades.csv").is_file()


def test_grade_accepts_zips_and_folders_of_submissions(tmp_path, small_assignment):
    klass = tmp_path / "class"
    make_submission(klass / "alice")
    with zipfile.ZipFile(klass / "bob.zip", "w") as z:
        for f in (ROOT / "reference").glob("*.py"):
            z.write(f, f"bob/{f.name}")
    (klass / "carol.zip").write_bytes(b"this is not a zip")
    out = tmp_path / "out"
    result = run("grade", klass, "--out", out, "--device", "cpu", "--assignment", small_assignment)
    assert result.exit_code == 0, result.output
    scores = {name: json.loads((out / name / "results.json").read_text())["score"] for name in ("alice", "bob", "carol")}
    assert scores == {"alice": 5, "bob": 5, "carol": 0}
    carol = json.loads((out / "carol" / "results.json").read_text())
    assert all(t["status"] == "failed" and t["extra_data"]["outcome"] == "error" and "cannot read carol.zip" in t["output"]
               for t in carol["tests"])


@pytest.mark.parametrize("make_bad, message", [
    (lambda tmp: tmp / "missing", "no such file or folder"),
    (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "not a submission"),
    (lambda tmp: (tmp / "broken.zip").write_bytes(b"nope") and tmp / "broken.zip", "cannot read this zip file"),
    (lambda tmp: (tmp / "notes.txt").write_text("hi") and tmp / "notes.txt", "expected a folder or a .zip"),
], ids=["missing", "empty-folder", "unreadable-zip", "not-a-zip"])
def test_bad_paths_exit_2_with_one_line_and_write_nothing(tmp_path, small_assignment, make_bad, message):
    out = tmp_path / "out"
    result = run("grade", make_bad(tmp_path), "--out", out, "--assignment", small_assignment)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_a_typo_in_the_assignment_file_exits_2_naming_the_key(tmp_path):
    bad = tmp_path / "assignment.yaml"
    bad.write_text("exercises:\n  tensors:\n    targets:\n      view: {pionts: 3}\n")
    result = run("grade", ROOT / "reference", "--out", tmp_path / "out", "--assignment", bad)
    assert result.exit_code == 2
    assert "exercises.tensors.targets.view.pionts: unknown key 'pionts' (did you mean 'points'?)" in result.output
    assert not (tmp_path / "out").exists()


def test_check_prints_a_summary_and_writes_a_report(tmp_path, small_assignment):
    result = run("check", "--path", ROOT / "exercises", "--device", "cpu", "--report", tmp_path / "r",
                 "--assignment", small_assignment)
    assert result.exit_code == 1, result.output  # the stubs fail their checks: a CI job running this fails
    assert "one_hot is not implemented yet (it raises NotImplementedError)" in result.output
    assert "score: 0 / " in result.output
    assert (tmp_path / "r" / "report.html").is_file()


def test_check_rejects_an_unknown_target(small_assignment):
    result = run("check", "tensors.veiw", "--assignment", small_assignment)
    assert result.exit_code == 2
    assert "unknown exercise or target 'tensors.veiw'" in result.output


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the CUDA stand-in grades only without CUDA")
@pytest.mark.parametrize("lang, words", [("en", "found without a GPU, by the CUDA stand-in"),
                                         ("zh", "本机没有 GPU，由 CUDA 替身发现")])
def test_check_and_grade_report_a_cuda_only_mistake_on_a_machine_without_cuda(tmp_path, small_assignment, monkeypatch,
                                                                                lang, words):
    """one_hot's torch.zeros without the device: right on the CPU, found by the CUDA stand-in (the bundled
    course's cuda_standin: score), with the student's line and what to do, in the student's language."""
    from torchgrade.engine import i18n

    monkeypatch.setattr(i18n, "_current", i18n._current)  # `check --lang` sets it for the process: put back after
    monkeypatch.setenv("TORCHGRADE_CUDA_STANDIN", "score")
    mistake = (ROOT / "tests" / "fairness" / "tensors" / "one_hot_zeros_on_the_cpu.py").read_text()
    folder = make_submission(tmp_path / "student", append={"tensors": mistake})
    result = run("check", "tensors.one_hot", "--path", folder, "--lang", lang, "--report", tmp_path / "r",
                 "--assignment", small_assignment)
    assert result.exit_code == 1, result.output
    assert "[cuda]" in result.output and "[cpu]" not in result.output.split("score")[0].replace("[cuda]", "")
    assert words in result.output and "device=x.device" in result.output and "tensors.py, line" in result.output
    out = tmp_path / "graded"
    i18n.set_language(None)
    monkeypatch.setenv("TORCHGRADE_LANG", lang)
    result = run("grade", folder, "--out", out, "--assignment", small_assignment)
    assert result.exit_code == 0, result.output
    document = json.loads((out / "student" / "results.json").read_text())
    assert document["extra_data"]["cuda_standin"] == "score" and document["score"] < document["extra_data"]["max_score"]
    lost = [t for t in document["tests"] if t["status"] == "failed"]
    assert lost and all(t["extra_data"]["device"] == "cuda" and t["extra_data"]["standin"] for t in lost)
    assert "device=x.device" in lost[0]["output"] and words in lost[0]["output"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the CUDA stand-in grades only without CUDA")
def test_a_class_graded_in_parallel_on_the_stand_in_gives_correct_work_full_marks(tmp_path, small_assignment,
                                                                                 monkeypatch):
    """Workers take the reference's outcomes another process recorded; those of the stand-in are marked
    there (tensors on CUDA) and must come back on the stand-in (they once came back as the marks)."""
    monkeypatch.setenv("TORCHGRADE_CUDA_STANDIN", "score")
    for name in ("ann", "bob", "cy"):
        make_submission(tmp_path / "class" / name)
    result = run("grade", tmp_path / "class", "--out", tmp_path / "out", "-j", 2, "--assignment", small_assignment)
    assert result.exit_code == 0, result.output
    for name in ("ann", "bob", "cy"):
        document = json.loads((tmp_path / "out" / name / "results.json").read_text())
        assert document["extra_data"]["cuda_standin"] == "score"
        assert document["score"] == document["extra_data"]["max_score"] == 5, [
            t["output"][:300] for t in document["tests"] if t["status"] != "passed"][:2]
        assert any(t["extra_data"].get("standin") for t in document["tests"])


@pytest.mark.parametrize("first", [False, True], ids=["whole", "exitfirst"])
def test_check_where_no_sandbox_starts_says_so_in_one_line_after_collecting(tmp_path, small_assignment, monkeypatch,
                                                                              first):
    # check collects its checks while the sandbox starts (torchgrade/cli/student.py): a sandbox that cannot start
    # is still one line and exit status 2, not an error per check
    from torchgrade.sandbox import host, isolation

    monkeypatch.setenv(isolation.ENV_VAR, "bwrap")
    monkeypatch.setattr(isolation.shutil, "which", lambda name, *a, **k: None)  # no bubblewrap here
    host.close_all()
    try:
        result = run("check", "--path", ROOT / "reference", "--assignment", small_assignment, "--device", "cpu",
                     "--report", tmp_path / "report", *(["-x"] if first else []))
    finally:
        host.close_all()
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "bwrap" in lines[0] and "sandbox" in lines[0].lower(), result.output
    assert not (tmp_path / "report" / "results.json").exists()
