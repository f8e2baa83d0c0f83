"""The scripts the pipeline and the pull-request workflow run: what they call, with which credentials."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_constructs.pipeline.pipeline_steps import CHECK_SCRIPT, FABRIC_SCRIPT, GATE_SCRIPT, SYNTH_SCRIPT
from tests.scripts.ci.helpers import executable, installed_by, script_env
from tests.synth import ROOT

SHELLCHECK = Path(sys.executable).with_name("shellcheck")
CI_SCRIPTS = sorted((ROOT / "scripts" / "ci").glob("*.sh"))
ROLE = "arn:aws:iam::111111111111:role/cdk-hnb659fds-lookup-role-111111111111-us-east-1"


@pytest.mark.parametrize("script", CI_SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_is_clean(script: Path) -> None:
    result = subprocess.run(
        # -x from the repository root: follow `source scripts/ci/role_env.sh` as the scripts do (they cd there)
        [str(SHELLCHECK), "-x", "--norc", "--severity=style", "--format=gcc", str(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_pipeline_steps_name_scripts_that_exist_and_run() -> None:
    for script in (SYNTH_SCRIPT, CHECK_SCRIPT, FABRIC_SCRIPT, GATE_SCRIPT, "scripts/ci/ami_gate.py"):
        path = ROOT / script
        assert path.is_file() and os.access(path, os.X_OK), script


# --- the synth step ------------------------------------------------------------------------------------------


def test_synth_script_runs_the_test_suite_then_synthesizes_the_pipeline(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "make", f'#!/bin/sh\necho "$*" >>"{calls}"\n')
    result = subprocess.run(
        [str(ROOT / SYNTH_SCRIPT)],
        cwd=tmp_path,  # the script finds the repository itself
        env=script_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == ["test", "synth-pipeline"]


def test_synth_script_stops_when_the_tests_fail(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "make", f'#!/bin/sh\necho "$*" >>"{calls}"\n[ "$1" != test ]\n')
    result = subprocess.run(
        [str(ROOT / SYNTH_SCRIPT)],
        env=script_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert calls.read_text().splitlines() == ["test"]


# --- the post-deploy check -----------------------------------------------------------------------------------


def _fake_python(tmp_path: Path, exit_status: int) -> tuple[Path, Path]:
    """A stand-in for the check's Python: records its arguments, the AWS profile it was given, and exits."""
    record = tmp_path / "record"
    fake = executable(
        tmp_path / "python",
        "#!/bin/sh\n"
        f'{{ echo "args: $*"; echo "cwd: $(pwd)"; echo "profile: $AWS_PROFILE"; cat "$AWS_CONFIG_FILE"; '
        f'echo "key: ${{AWS_ACCESS_KEY_ID:-none}}"; }} >"{record}"\n'
        f"exit {exit_status}\n",
    )
    return fake, record


def _run_check(env_name: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / CHECK_SCRIPT), env_name],
        cwd="/",
        env=script_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_runs_the_check_script_with_the_assumed_role_of_the_environment(tmp_path: Path) -> None:
    fake, record = _fake_python(tmp_path, 0)
    result = _run_check("staging", CHECK_ROLE_ARN=ROLE, CHECK_PYTHON=str(fake), AWS_ACCESS_KEY_ID="AKIAEXAMPLE")
    assert result.returncode == 0, result.stderr
    assert record.read_text().splitlines() == [
        "args: scripts/check_environment.py staging --json",
        f"cwd: {ROOT}",
        "profile: check",
        "[profile check]",
        f"role_arn = {ROLE}",
        "credential_source = EcsContainer",
        "role_session_name = gpu-platform-check-staging",
        "key: none",  # the container's credentials are the source; no other key may leak into the check
    ]


@pytest.mark.parametrize("status", [1, 2])
def test_a_failed_check_fails_the_step_with_its_status(tmp_path: Path, status: int) -> None:
    fake, _ = _fake_python(tmp_path, status)
    assert _run_check("dev", CHECK_ROLE_ARN=ROLE, CHECK_PYTHON=str(fake)).returncode == status


def test_check_refuses_to_run_without_a_role(tmp_path: Path) -> None:
    fake, record = _fake_python(tmp_path, 0)
    result = _run_check("dev", CHECK_PYTHON=str(fake))
    assert result.returncode != 0
    assert "CHECK_ROLE_ARN" in result.stderr
    assert not record.exists()


def test_check_installs_only_what_the_check_needs_at_the_pinned_versions(tmp_path: Path) -> None:
    pinned = {
        line.split("==")[0]: line for line in (ROOT / "requirements.txt").read_text().splitlines() if "==" in line
    }
    assert sorted(installed_by(CHECK_SCRIPT, tmp_path)) == sorted(
        pinned[name] for name in ("boto3", "pydantic", "PyYAML")
    )
    assert os.access(ROOT / CHECK_SCRIPT, os.X_OK)
