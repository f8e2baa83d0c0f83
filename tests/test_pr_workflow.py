"""The pull-request workflow: valid YAML, the commands of CI and the README, the snapshot diff in the summary."""

from __future__ import annotations

import yaml

from tests.synth import ROOT


def _workflow() -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / "pr.yml").read_text())


def test_pull_request_workflow_parses_and_runs_on_pull_requests() -> None:
    workflow = _workflow()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers
    assert workflow["permissions"] == {}  # no token scope but what a job asks for
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read"}
    for step in job["steps"]:
        assert ("uses" in step) != ("run" in step), step


def test_pull_request_workflow_runs_the_commands_of_ci_and_the_readme() -> None:
    (job,) = _workflow()["jobs"].values()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert ci == ["make synth", "make test"]
    assert runs[: len(ci)] == ci
    readme = (ROOT / "README.md").read_text()
    for command in ci:
        assert f"{command} " in readme or f"`{command}`" in readme, command


def test_pull_request_workflow_posts_the_snapshot_diff_as_the_job_summary() -> None:
    (job,) = _workflow()["jobs"].values()
    (step,) = [s for s in job["steps"] if "snapshot_diff.sh" in s.get("run", "")]
    assert step["run"].endswith('>>"$GITHUB_STEP_SUMMARY"')
    assert step["if"] == "${{ !cancelled() }}"  # also, and above all, when the tests failed on a snapshot
    script = (ROOT / "scripts" / "ci" / "snapshot_diff.sh").read_text()
    assert "--snapshot-update" in script
    assert "snapshots=(tests/snapshot/__snapshots__)" in script  # the environments' stacks and the pipeline's
