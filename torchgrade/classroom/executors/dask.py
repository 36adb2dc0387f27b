"""An executor on Dask distributed: a local cluster, or the scheduler of a real one.

Why Dask: `pip install 'torchgrade[cluster]'` installs it from PyPI with pure-Python wheels, and
`LocalCluster` runs the same scheduler and worker processes on one machine as on a cluster
(`dask scheduler` / `dask worker ADDRESS --nthreads 1` on each machine), so what the tests run is
what a course runs. Ray would work too, but brings a large native runtime for a job this simple.

Workers need torchgrade and nothing else: no shared file system, no copy of the course. Each task
carries the submission as zip bytes (`torchgrade.classroom.submissions.packed`); the course (the assignment
file, the checks, the reference, the course's probes and hints) travels as one content-addressed
pack (`torchgrade.classroom.coursepack`), scattered to every worker once per run and unpacked once per machine
into a folder named by its digest. A worker grades one submission at a time and keeps its collected
checks and reference outcomes between tasks. A worker
that dies is replaced by Dask, which retries the task elsewhere; a task that kills workers
repeatedly (`KilledWorker`) is `Crashed` for that submission.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Iterator

from torchgrade.engine.config import load_assignment
from torchgrade.classroom.coursepack import CoursePack, materialise, pack
from torchgrade.engine.scoring import Grade
from torchgrade.classroom.submissions import Submission, packed
from torchgrade.classroom.executors.outcomes import Crashed, Job, Outcome

KILLED = "the grading process died each time it graded this submission, so it is not graded; the rest of the class was"


def available() -> bool:
    """Whether Dask distributed is installed (the `cluster` extra)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


class DaskExecutor:
    """Grades on a Dask cluster: the one at `address`, or a LocalCluster of `jobs` worker processes."""

    def __init__(self, jobs: int = 1, address: str | None = None):
        self.jobs = max(1, jobs)
        self.address = address

    def _client(self):
        from distributed import Client, LocalCluster

        if self.address:
            return Client(self.address), None
        # One thread per worker: a worker's pytest session grades one submission at a time.
        cluster = LocalCluster(n_workers=self.jobs, threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.ERROR)
        return Client(cluster), cluster

    def run(self, job: Job, submissions: list[Submission]) -> Iterator[Outcome]:
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        client, cluster = self._client()
        try:
            if hasattr(job, "assignment_path"):  # a GradeJob: the course goes with it, once per worker
                course = client.scatter(pack(load_assignment(job.assignment_path)), broadcast=True, hash=True)
                job, extra = ShippedJob(job), (course,)
            else:
                extra = ()
            futures = {client.submit(job, *extra, PackedSubmission(s.name, packed(s)), pure=False): s
                       for s in submissions}
            for future in as_completed(futures):
                s = futures.pop(future)
                try:
                    grade = future.result()
                except KilledWorker:
                    yield s, Crashed(KILLED)
                    continue
                yield s, grade
        finally:
            for future in futures:
                future.cancel()
            client.close()
            if cluster is not None:
                cluster.close()


class PackedSubmission:
    """A submission as zip bytes, graded by `torchgrade.classroom.batch.GradeJob` wherever the task lands."""

    def __init__(self, name: str, data: bytes):
        self.name = name
        self.data = data


@dataclass(frozen=True)
class ShippedJob:
    """A GradeJob whose course arrives with the task (a CoursePack) instead of lying at a path."""

    job: Job

    def __call__(self, course: CoursePack, submission) -> Grade:
        return replace(self.job, assignment_path=str(materialise(course)))(submission)
