"""scripts/ci/fabric_check.sh, the FabricCheck step's script: fabric-test on each training fleet as the
environment's role, the worst exit status, and the AMI the fleets ran on (scripts/ci/ami_gate.py tested) in
FABRIC_AMI_FILE for the step to export."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpu_constructs.pipeline.pipeline_steps import FABRIC_SCRIPT
from tests.scripts.ci.helpers import AMI_NAME, fake_fabric_python, installed_by, script_env
from tests.synth import ROOT

STAGING = "222222222222"  # tests/fixtures/config/staging.yaml
ENV_ROLE = f"arn:aws:iam::{STAGING}:role/gpu-platform-staging-fabric-check"


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / FABRIC_SCRIPT), *args],
        cwd=tmp_path,
        env={k: v for k, v in script_env(**env).items() if k != "FABRIC_ROLE_ARN" or "FABRIC_ROLE_ARN" in env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_script_runs_fabric_test_for_each_fleet_as_the_environment_role(tmp_path: Path) -> None:
    fake, record = fake_fabric_python(tmp_path, {"training": 0, "big": 0})
    result = _run(
        tmp_path, "staging", "training", "big", FABRIC_ROLE_ARN=ENV_ROLE, CHECK_PYTHON=str(fake), AWS_ACCESS_KEY_ID="AK"
    )
    assert result.returncode == 0, result.stderr
    runs = record.read_text().split("args: ")[1:]
    assert [r.splitlines()[0] for r in runs] == [
        f"-m ops.cli job fabric-test --env staging --fleet {fleet} --json --allow-idle --timeout 600"
        for fleet in ("training", "big")
    ]
    for run in runs:
        assert run.splitlines()[1:] == [
            "profile: fabric",
            f"role_arn = {ENV_ROLE}",
            "role_session_name = gpu-platform-fabric-staging",
            "key: none",  # the container's credentials are the source
        ]
    # Each fleet's JSON report reaches the build log.
    assert [json.loads(line)["fleet"] for line in result.stdout.splitlines()] == ["training", "big"]


@pytest.mark.parametrize(
    ("statuses", "expected"), [({"a": 1, "b": 0}, 1), ({"a": 0, "b": 2}, 2), ({"a": 1, "b": 2}, 2)]
)
def test_a_fleet_below_its_floor_or_unchecked_fails_the_step_after_every_fleet_ran(
    tmp_path: Path, statuses: dict[str, int], expected: int
) -> None:
    fake, record = fake_fabric_python(tmp_path, statuses)
    ami_file = tmp_path / "ami.txt"
    result = _run(
        tmp_path, "staging", "a", "b", FABRIC_ROLE_ARN=ENV_ROLE, CHECK_PYTHON=str(fake), FABRIC_AMI_FILE=str(ami_file)
    )
    assert result.returncode == expected
    assert record.read_text().count("args: ") == 2
    assert not ami_file.exists()  # a failed check vouches for no AMI


def test_the_ami_the_fleets_ran_on_goes_to_the_ami_file(tmp_path: Path) -> None:
    """A fleet with fewer than two nodes prints no report: the AMI is the one of the fleets that ran."""
    fake, _ = fake_fabric_python(tmp_path, {"training": 0, "idle": 0}, {"idle": None})
    result = _run(
        tmp_path, "staging", "training", "idle", FABRIC_ROLE_ARN=ENV_ROLE, CHECK_PYTHON=str(fake),
        FABRIC_AMI_FILE="ami.txt",  # relative to where the step runs, as the pipeline sets it
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ami.txt").read_text() == f"{AMI_NAME}\n"
    assert f"fabric check: staging: tested AMI: {AMI_NAME}" in result.stderr.splitlines()


def test_no_fleet_with_two_nodes_tests_no_ami(tmp_path: Path) -> None:
    fake, _ = fake_fabric_python(tmp_path, {"training": 0}, {"training": None})
    ami_file = tmp_path / "ami.txt"
    result = _run(
        tmp_path, "staging", "training", FABRIC_ROLE_ARN=ENV_ROLE, CHECK_PYTHON=str(fake), FABRIC_AMI_FILE=str(ami_file)
    )
    assert result.returncode == 0, result.stderr  # an idle fleet still passes the check itself
    assert ami_file.read_text() == "not tested: no training fleet had two nodes to test\n"


def test_fleets_on_amis_of_different_names_fail_the_step_in_one_line(tmp_path: Path) -> None:
    fake, _ = fake_fabric_python(tmp_path, {"a": 0, "b": 0}, {"a": AMI_NAME, "b": "gpu-platform-dev-gpu-node older"})
    ami_file = tmp_path / "ami.txt"
    result = _run(
        tmp_path, "staging", "a", "b", FABRIC_ROLE_ARN=ENV_ROLE, CHECK_PYTHON=str(fake), FABRIC_AMI_FILE=str(ami_file)
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"ami gate: the training fleets ran on different AMIs (a: {AMI_NAME}; b: gpu-platform-dev-gpu-node older); "
        "the check vouches for one image; fix: let the instance refreshes finish, then rerun the fabric check"
    )
    assert "Traceback" not in result.stderr and not ami_file.exists()


def test_script_refuses_without_a_role_or_a_fleet(tmp_path: Path) -> None:
    fake, record = fake_fabric_python(tmp_path, {"training": 0})
    no_role = _run(tmp_path, "staging", "training", CHECK_PYTHON=str(fake))
    assert no_role.returncode != 0 and "FABRIC_ROLE_ARN" in no_role.stderr
    no_fleet = _run(tmp_path, "staging", FABRIC_ROLE_ARN=ENV_ROLE, CHECK_PYTHON=str(fake))
    assert no_fleet.returncode == 2 and "usage:" in no_fleet.stderr
    assert not record.exists()


def test_script_installs_what_the_command_line_needs_at_the_pinned_versions(tmp_path: Path) -> None:
    pinned = {
        line.split("==")[0]: line for line in (ROOT / "requirements.txt").read_text().splitlines() if "==" in line
    }
    wanted = [pinned[name] for name in ("boto3", "pydantic", "PyYAML", "typer", "rich")]
    assert sorted(installed_by(FABRIC_SCRIPT, tmp_path)) == sorted(wanted)
    assert os.access(ROOT / FABRIC_SCRIPT, os.X_OK)
