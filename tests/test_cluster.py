"""The Dask executor, against a real local cluster (skipped without the `cluster` extra)."""

from __future__ import annotations

import json
import logging
import os

import pytest
from click.testing import CliRunner

from torchgrade.classroom.batch import GradeJob, grade_class
from torchgrade.cli import main
from torchgrade.engine.config import load_assignment
from torchgrade.classroom.executors import dask as dask_executor
from torchgrade.classroom.executors.local import InProcess
from torchgrade.classroom.submissions import discover

from tiny_course import copy_class, make_course, student, zipped

needs_dask = pytest.mark.skipif(not dask_executor.available(),
                                reason="Dask distributed is not installed: pip install 'torchgrade[cluster]'")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return load_assignment(make_course(tmp_path_factory.mktemp("course")))


@needs_dask
def test_a_local_dask_cluster_grades_folders_and_zips_as_this_process_does(course, tmp_path):
    from distributed import LocalCluster

    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    zipped(student(tmp_path / "carol", "reference"), cls / "carol.zip")
    submissions = discover([cls], ("tensors",))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster:
        result = grade_class(submissions, course, tmp_path / "out", device="cpu",
                             executor=dask_executor.DaskExecutor(address=cluster.scheduler_address))
    assert sorted(result.graded) == ["alice", "bob", "carol"]
    here = dict((s.name, g) for s, g in InProcess().run(GradeJob(str(course.path), "cpu"), submissions))
    for g in result.grades:
        assert [(t.name, t.status, t.score) for t in g.tests] == [(t.name, t.status, t.score) for t in here[g.submission].tests]
    assert json.loads((tmp_path / "out" / "carol" / "results.json").read_text())["score"] == 5.0


@pytest.mark.skipif(dask_executor.available(), reason="Dask distributed is installed")
def test_the_dask_executor_without_the_extra_says_how_to_install_it(course, tmp_path):
    result = CliRunner().invoke(main, ["grade", str(student(tmp_path / "alice")), "--out", str(tmp_path / "out"),
                                       "--executor", "dask", "--assignment", str(course.path)])
    assert result.exit_code == 2
    assert "pip install 'torchgrade[cluster]'" in result.output
    assert not (tmp_path / "out").exists()


def _results(out):
    """Each submission's results.json, without what differs from run to run (times)."""
    graded = {}
    for path in sorted(out.glob("*/results.json")):
        data = json.loads(path.read_text())
        data.pop("execution_time", None)
        for test in data["tests"]:
            test["extra_data"].pop("duration", None)
        graded[path.parent.name] = data
    return graded


def _hidden(folder):
    """A command prefix that runs a process with `folder` hidden behind an empty tmpfs, where this
    machine can (root, util-linux's unshare): a worker that read the course there would find nothing."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("unshare") or subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode:
        return []
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs none "{folder}" && exec "$0" "$@"']


@pytest.mark.heavy
@needs_dask
def test_dask_workers_without_the_course_grade_a_class_as_the_local_pool_does(tmp_path):
    """A real `dask scheduler` and two `dask worker`s started in empty folders, with the course folder
    hidden from them: the course reaches them with the tasks, once per worker, and the class's results
    are those of `-j 2`."""
    import shutil
    import subprocess
    import sys
    import time

    from tiny_course import ROOT

    course = tmp_path / "course"
    (course / "reference").mkdir(parents=True)
    shutil.copy(ROOT / "reference" / "tensors.py", course / "reference")
    assignment = make_course(course)
    assignment.write_text(assignment.read_text().replace(str(ROOT / "reference"), str(course / "reference")))
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    zipped(student(tmp_path / "carol", "reference", "def one_hot(*a, **k):\n    raise ValueError('no')"),
           cls / "carol.zip")

    bin_dir = os.path.dirname(sys.executable)
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    processes = [subprocess.Popen([os.path.join(bin_dir, "dask"), "scheduler", "--port", "0",
                                   "--dashboard-address", ":0", "--scheduler-file", str(scheduler_file)],
                                  cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    caches = []
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        for i in range(2):
            home = tmp_path / f"worker{i}"
            caches.append(home / "cache")
            caches[-1].mkdir(parents=True)
            processes.append(subprocess.Popen(
                [*_hidden(course), os.path.join(bin_dir, "dask"), "worker", address, "--nthreads", "1",
                 "--nworkers", "1", "--no-dashboard", "--local-directory", str(home)],
                cwd=home, env={**env, "TORCHGRADE_COURSE_CACHE": str(caches[-1])},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        runner = CliRunner()
        shipped = runner.invoke(main, ["grade", str(cls), "--out", str(tmp_path / "dask"), "--executor", "dask",
                                       "--scheduler", address, "--assignment", str(assignment), "--device", "cpu"])
        assert shipped.exit_code == 0, shipped.output
    finally:
        for p in reversed(processes):
            p.terminate()
        for p in processes:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    pool = CliRunner().invoke(main, ["grade", str(cls), "--out", str(tmp_path / "pool"), "-j", "2",
                                     "--assignment", str(assignment), "--device", "cpu"])
    assert pool.exit_code == 0, pool.output
    assert _results(tmp_path / "dask") == _results(tmp_path / "pool")
    assert sorted(_results(tmp_path / "dask")) == ["alice", "bob", "carol"]
    # each worker that took a task holds the course once, in a folder named by its digest
    unpacked = [sorted(p.name for p in cache.iterdir()) for cache in caches]
    assert all(len(names) <= 1 for names in unpacked) and any(unpacked)
    assert all(n.startswith("torchgrade-course-") for names in unpacked for n in names)
