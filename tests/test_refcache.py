"""The reference's outcomes kept between runs of `torchgrade check` (torchgrade/engine/refcache.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from torchgrade.engine import differential, refcache
from torchgrade.engine import fingerprint
from torchgrade.cli import main
from torchgrade.engine.config import load_assignment

from tiny_course import FULL_MARKS, make_course, student


@pytest.fixture
def course(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHGRADE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(differential, "_reference_outcomes", {})  # nothing from another test's run
    return load_assignment(make_course(tmp_path / "course"))


def _check(course, folder):
    differential._reference_outcomes.clear()  # as a new process would start
    result = CliRunner().invoke(main, ["check", "--path", str(folder), "--assignment", str(course.path),
                                       "--device", "cpu", "--report", str(folder.parent / "report")])
    assert result.exit_code in (0, 1), result.output
    return result.output


def _cache_file(course):
    return refcache._path(refcache.key(course, "cpu"))


def test_a_second_check_takes_the_references_side_from_the_cache(course, tmp_path, monkeypatch):
    work = student(tmp_path / "work")
    assert f"{FULL_MARKS:g} / {FULL_MARKS:g}" in _check(course, work)
    assert _cache_file(course).is_file()

    def no_reference(*args, **kwargs):
        raise AssertionError("the reference ran again")

    monkeypatch.setattr(differential, "run_probe", no_reference)
    assert f"{FULL_MARKS:g} / {FULL_MARKS:g}" in _check(course, work)


@pytest.mark.parametrize("damage", [
    lambda data: data[:len(data) // 2],                      # cut short (a full disk, a kill)
    lambda data: data[:-1] + bytes([data[-1] ^ 1]),          # one bit changed
    lambda data: b"something else entirely",                 # not a cache file
])
def test_a_damaged_cache_is_not_trusted_the_reference_runs_and_the_cache_is_written_anew(course, tmp_path, damage):
    work = student(tmp_path / "work")
    _check(course, work)
    path = _cache_file(course)
    good = path.read_bytes()
    path.write_bytes(damage(good))
    assert refcache.load(refcache.key(course, "cpu")) == {}
    assert f"{FULL_MARKS:g} / {FULL_MARKS:g}" in _check(course, work)
    assert refcache.load(refcache.key(course, "cpu")) != {}


def test_a_cache_written_for_another_key_is_not_taken(course, tmp_path):
    _check(course, student(tmp_path / "work"))
    cache_key = refcache.key(course, "cpu")
    other = "0" * 32
    refcache._path(other).write_bytes(_cache_file(course).read_bytes())
    assert refcache.load(other) == {} and refcache.load(cache_key) != {}


def _change_file(course, part):
    path = {"assignment": course.path, "check": next(course.checks_dir.rglob("test_*.py")),
            "probes": course.root / "graders" / "probes" / "mine.py", "hints": course.hints_file}[part]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((path.read_text() if path.exists() else "") + "\n# changed\n")


@pytest.mark.parametrize("change", ["assignment", "check", "probes", "hints", "reference", "device", "torch",
                                    "torchgrade", "hardware"])
def test_the_key_changes_with_everything_an_outcome_depends_on(course, tmp_path, monkeypatch, change):
    before = refcache.key(course, "cpu")
    device = "cpu"
    if change == "reference":  # a course whose reference is its own copy
        reference = tmp_path / "reference"
        reference.mkdir()
        (reference / "tensors.py").write_text((course.reference_dir / "tensors.py").read_text())
        course.path.write_text(course.path.read_text().replace(str(course.reference_dir), str(reference)))
        course = load_assignment(course.path)
        before = refcache.key(course, "cpu")
        (reference / "tensors.py").write_text((reference / "tensors.py").read_text() + "\n# changed\n")
    elif change == "device":
        device = "all"
    elif change == "torch":
        import torch

        monkeypatch.setattr(torch, "__version__", torch.__version__ + ".other")
    elif change == "torchgrade":
        monkeypatch.setattr(fingerprint, "__version__", "0.0.0-other")
    elif change == "hardware":
        monkeypatch.setattr(refcache, "_hardware", lambda: "another machine")
    else:
        _change_file(course, change)
    assert refcache.key(course, device) != before


def test_a_cache_signed_without_the_folders_secret_is_not_trusted(course, tmp_path):
    """What a student's code would write: the format and the key right, the contents its own, hashed in plain."""
    import hashlib

    from torchgrade.sandbox import wire

    _check(course, student(tmp_path / "work"))
    cache_key = refcache.key(course, "cpu")
    payload = wire.encode({"key": cache_key, "outcomes": {"forged": {}}})
    _cache_file(course).write_bytes(refcache.FORMAT + hashlib.sha256(payload).digest() + payload)
    assert refcache.load(cache_key) == {}
    assert (refcache.cache_dir() / "secret").stat().st_mode & 0o077 == 0


def test_at_isolation_process_the_cache_is_neither_read_nor_written_and_is_emptied_afterwards(course, tmp_path,
                                                                                              monkeypatch):
    work = student(tmp_path / "work")
    _check(course, work)
    assert _cache_file(course).is_file() and (refcache.cache_dir() / "secret").is_file()
    monkeypatch.setenv("TORCHGRADE_ISOLATION", "process")
    ran = []
    real = differential.run_probe
    monkeypatch.setattr(differential, "run_probe", lambda *a, **k: ran.append(1) or real(*a, **k))
    assert f"{FULL_MARKS:g} / {FULL_MARKS:g}" in _check(course, work)
    assert ran  # the reference ran here: the cache was not read
    # Whatever the student's code wrote or read there (the secret too) is gone: a later check signs anew.
    assert not _cache_file(course).exists() and not (refcache.cache_dir() / "secret").exists()
