"""The Dask executor, against a real local cluster (skipped without the `cluster` extra)."""

from __future__ import annotations

import json
import logging

import pytest
from click.testing import CliRunner

from torchgrade.batch import GradeJob, grade_class
from torchgrade.cli import main
from torchgrade.config import load_assignment
from torchgrade.executors import dask as dask_executor
from torchgrade.executors.local import InProcess
from torchgrade.submissions import discover

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
