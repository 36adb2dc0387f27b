"""The shipped GitHub Actions workflow grades in a sandbox, with the least privilege, on CPU torch."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "grade-class.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def runs(job: dict) -> list[str]:
    return [s["run"] for s in steps(job) if "run" in s]


def test_it_is_started_by_hand_only_and_reads_no_untrusted_event(workflow):
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(triggers) == {"workflow_dispatch"}


def test_its_token_is_read_only_except_for_publishing_check_results(workflow):
    assert workflow["permissions"] == {"contents": "read"}
    for name, job in workflow["jobs"].items():
        granted = job.get("permissions", workflow["permissions"])
        assert isinstance(granted, dict), name
        writes = {scope for scope, level in granted.items() if level == "write"}
        assert writes <= ({"checks"} if name == "merge" else set()), (name, writes)


def test_no_checkout_leaves_the_token_on_disk(workflow):
    checkouts = [s for job in workflow["jobs"].values() for s in steps(job)
                 if str(s.get("uses", "")).startswith("actions/checkout")]
    assert checkouts and all(s.get("with", {}).get("persist-credentials") is False for s in checkouts)


def test_grading_installs_bubblewrap_and_demands_it(workflow):
    job = workflow["jobs"]["grade"]
    commands = runs(job)
    install = next(i for i, r in enumerate(commands) if re.search(r"apt-get install -y bubblewrap\b", r))
    grade = next(i for i, r in enumerate(commands) if "torchgrade grade" in r)
    assert install < grade
    assert "--isolation bwrap" in commands[grade]
    assert workflow["env"]["TORCHGRADE_ISOLATION"] == "bwrap"


def test_torch_is_the_cpu_build_pinned_by_the_constraints_file(workflow):
    for name, job in workflow["jobs"].items():
        installs = [r for r in runs(job) if "pip install" in r]
        assert installs, name
        for command in installs:
            for line in command.splitlines():
                if "pip install" in line:
                    assert "-c constraints.txt" in line, line
            torch_line = next(line for line in command.splitlines() if re.search(r"pip install .*\btorch\b", line))
            assert re.search(r"--index-url \S+/whl/cpu\b", torch_line), torch_line
            assert command.index(torch_line) < command.index("-e .")  # torch first: `-e .` finds it installed


def test_inputs_reach_the_shell_as_variables_not_as_script(workflow):
    for job in workflow["jobs"].values():
        for command in runs(job):
            assert "${{ inputs." not in command and "${{ github.event" not in command
