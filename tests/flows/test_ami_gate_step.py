"""The AMI gate: ``ami_gate`` of pipeline.yaml, through the synthesized pipeline (an AmiGate action in prod's stage
after the approval and before any deploy, fed staging's FabricCheck exported variable, its project role) to
prod's Fleets stack (the role the step assumes: the AMI parameter and DescribeImages only, trusting the project
role alone), and the step's script. The comparison itself: tests/scripts/ci/test_ami_gate.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from config import load_environment
from config.pipeline_schema import ami_gate_trust
from gpu_constructs.pipeline.pipeline_steps import FABRIC_AMI_VARIABLE, GATE_SCRIPT
from tests.flows.checked_pipeline import TOOLING, with_pipeline
from tests.flows.checked_pipeline import actions as _actions
from tests.flows.checked_pipeline import by_type as _by_type
from tests.iam_documents import Resolver
from tests.ops.helpers import config_dir
from tests.policy_eval import ALLOW, Request, decide, explain
from tests.role_policies import granted_requests as _requests
from tests.role_policies import roles
from tests.scripts.ci.helpers import AMI_NAME, executable, fake_fabric_python, installed_by, script_env
from tests.synth import ROOT

PROD = "333333333333"  # tests/fixtures/config/prod.yaml
GATE_ROLE = f"arn:aws:iam::{PROD}:role/gpu-platform-prod-ami-gate"
STEP_ROLE = f"arn:aws:iam::{TOOLING}:role/gpu-platform-pipeline-prod-ami-gate"
PARAMETER = f"arn:aws:ssm:us-east-1:{PROD}:parameter/imagebuilder/gpu-platform/prod/ami/latest"


def _project(pipeline: dict[str, Any], action: dict[str, Any]) -> dict[str, Any]:
    return pipeline["Resources"][action["Configuration"]["ProjectName"]["Ref"]]


def _role_policies(pipeline: dict[str, Any], project: dict[str, Any]) -> list[dict[str, Any]]:
    role_id = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    resolver = Resolver(pipeline, account=TOOLING, region="us-east-1")
    return [
        resolver.resolve(p["Properties"]["PolicyDocument"])
        for p in _by_type(pipeline, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]


def test_trust_only_where_the_pipeline_gates_the_environment(tmp_path: Path) -> None:
    folder = config_dir(tmp_path)
    prod, staging = load_environment("prod", folder), load_environment("staging", folder)
    assert ami_gate_trust(prod, folder) is None  # no pipeline file
    with_pipeline(folder, fabric_check=["staging"])
    assert ami_gate_trust(prod, folder) is None  # the default: off
    with_pipeline(folder, fabric_check=["staging"], ami_gate=["prod"])
    trust = ami_gate_trust(prod, folder)
    assert trust is not None and (trust.account, trust.role_name) == (TOOLING, "gpu-platform-pipeline-prod-ami-gate")
    assert ami_gate_trust(staging, folder) is None


# --- the pipeline -------------------------------------------------------------------------------------------------


def test_the_gate_runs_after_the_approval_and_before_any_prod_deploy(checked_synth) -> None:
    actions = _actions(checked_synth["pipeline"], "prod")
    (approve,) = [a for a in actions if a["Name"] == "Approve"]
    (gate,) = [a for a in actions if a["Name"] == "AmiGate"]
    deploys = [a for a in actions if a["ActionTypeId"]["Provider"] == "CloudFormation"]
    assert approve["RunOrder"] < gate["RunOrder"] < min(a["RunOrder"] for a in deploys)
    assert all(
        "AmiGate" not in {a["Name"] for a in _actions(checked_synth["pipeline"], env)} for env in ("dev", "staging")
    )


def test_the_gate_reads_the_ami_name_staging_fabric_check_exports(checked_synth) -> None:
    pipeline = checked_synth["pipeline"]
    (fabric,) = [a for a in _actions(pipeline, "staging") if a["Name"] == "FabricCheck"]
    (gate,) = [a for a in _actions(pipeline, "prod") if a["Name"] == "AmiGate"]
    variables = {v["name"]: v["value"] for v in json.loads(gate["Configuration"]["EnvironmentVariables"])}
    assert variables == {"TESTED_AMI_NAME": f"#{{{fabric['Namespace']}.{FABRIC_AMI_VARIABLE}}}"}
    spec = json.loads(_project(pipeline, fabric)["Properties"]["Source"]["BuildSpec"])
    assert spec["env"]["exported-variables"] == [FABRIC_AMI_VARIABLE]
    project = _project(pipeline, gate)
    assert json.loads(project["Properties"]["Source"]["BuildSpec"])["phases"]["build"]["commands"] == [
        f"{GATE_SCRIPT} prod staging"
    ]
    env = {v["Name"]: v["Value"] for v in project["Properties"]["Environment"]["EnvironmentVariables"]}
    assert env == {"GATE_ROLE_ARN": GATE_ROLE}


def test_the_fabric_steps_commands_export_what_the_script_found(checked_synth, tmp_path: Path) -> None:
    """The buildspec's commands in one sh, as CodeBuild runs a phase (buildspec 0.2: one shell): the variable
    holds the name when the phase ends. Run in a copy of the layout the step sees (scripts/ at its top)."""
    (fabric,) = [a for a in _actions(checked_synth["pipeline"], "staging") if a["Name"] == "FabricCheck"]
    project = _project(checked_synth["pipeline"], fabric)
    commands = json.loads(project["Properties"]["Source"]["BuildSpec"])["phases"]["build"]["commands"]
    env = {v["Name"]: v["Value"] for v in project["Properties"]["Environment"]["EnvironmentVariables"]}
    fake, _ = fake_fabric_python(tmp_path, {"training": 0})
    source = tmp_path / "source"
    source.mkdir()
    (source / "scripts").symlink_to(ROOT / "scripts")
    result = subprocess.run(
        ["sh", "-ec", "\n".join([*commands, f'printf "%s" "${FABRIC_AMI_VARIABLE}"'])],
        cwd=source,
        env=script_env(**env, CHECK_PYTHON=str(fake)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == AMI_NAME


def test_the_step_role_may_assume_the_gate_role_of_prod_only(checked_synth) -> None:
    pipeline = checked_synth["pipeline"]
    actions = {a["Name"]: a for a in _actions(pipeline, "prod")}
    project = _project(pipeline, actions["AmiGate"])
    role_id = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    assert pipeline["Resources"][role_id]["Properties"]["RoleName"] == "gpu-platform-pipeline-prod-ami-gate"
    policies = _role_policies(pipeline, project)
    assert decide(policies, Request("sts:AssumeRole", GATE_ROLE)) == ALLOW
    for other in ("gpu-platform-staging-fabric-check", f"cdk-hnb659fds-deploy-role-{PROD}-us-east-1"):
        assert decide(policies, Request("sts:AssumeRole", f"arn:aws:iam::{PROD}:role/{other}")) != ALLOW
    check_policies = _role_policies(pipeline, _project(pipeline, actions["PostDeployCheck"]))
    assert decide(check_policies, Request("sts:AssumeRole", GATE_ROLE)) != ALLOW


# --- prod's role --------------------------------------------------------------------------------------------------


def test_the_gate_role_trusts_the_step_role_alone(checked_synth) -> None:
    (role,) = [
        r["Properties"]
        for r in _by_type(checked_synth["prod"], "AWS::IAM::Role").values()
        if r["Properties"].get("RoleName") == "gpu-platform-prod-ami-gate"
    ]
    trust = Resolver(checked_synth["prod"], account=PROD, region="us-east-1").resolve(role["AssumeRolePolicyDocument"])

    def assume(caller: str) -> str:
        request = Request("sts:AssumeRole", "*", {"AWS": caller}, context={"aws:PrincipalArn": caller})
        return decide([trust], request, resource_policy=True)

    assert assume(STEP_ROLE) == ALLOW
    assert assume(f"arn:aws:iam::{TOOLING}:role/gpu-platform-pipeline-staging-fabric-check") != ALLOW
    for env in ("dev", "staging"):
        names = {
            str(r["Properties"].get("RoleName", "")) for r in _by_type(checked_synth[env], "AWS::IAM::Role").values()
        }
        assert not [n for n in names if "ami-gate" in n], env


def test_the_gate_role_reads_prods_ami_parameter_and_describes_images_nothing_more(checked_synth) -> None:
    (role,) = [r for r in roles(checked_synth["synth"], "prod") if r.arn == GATE_ROLE]
    statements = [s for d in role.identity for s in d["Statement"]]
    assert sorted((s["Action"], s["Resource"]) for s in statements) == [
        ("ec2:DescribeImages", "*"),  # no resource type: see gpu_constructs/security/ami_gate_role.py
        ("ssm:GetParameter", PARAMETER),
    ]
    assert decide(role.identity, Request("ssm:GetParameter", PARAMETER)) == ALLOW
    for action, resource in [
        ("ssm:GetParameter", PARAMETER.replace("/prod/", "/staging/")),
        ("ssm:GetParameter", PARAMETER.replace(PROD, "111111111111")),
        ("ssm:PutParameter", PARAMETER),
        ("ssm:GetParameters", PARAMETER),
        ("ec2:DescribeInstances", "*"),
        ("ec2:CopyImage", "*"),
    ]:
        assert decide(role.identity, Request(action, resource)) != ALLOW, (action, resource)
    cfg = checked_synth["synth"].environments["prod"]
    for request, sid in _requests(role, cfg.account, cfg.region):
        assert decide([role.boundary], request) == ALLOW, f"{sid}: " + explain([role.boundary], request)


# --- the step's script --------------------------------------------------------------------------------------------


def _run_gate(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    record = tmp_path / "record"
    fake = executable(
        tmp_path / "python",
        f'#!/bin/bash\n{{ echo "args: $*"; echo "tested: $TESTED_AMI_NAME"; grep -h role_ "$AWS_CONFIG_FILE"; '
        f'echo "profile: $AWS_PROFILE key: ${{AWS_ACCESS_KEY_ID:-none}}"; }} >>"{record}"\n',
    )
    result = subprocess.run(
        [str(ROOT / GATE_SCRIPT), *args],
        cwd=tmp_path,
        env=script_env(CHECK_PYTHON=str(fake), **env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result, record


def test_script_runs_the_check_as_the_gate_role(tmp_path: Path) -> None:
    result, record = _run_gate(
        tmp_path, "prod", "staging", GATE_ROLE_ARN=GATE_ROLE, TESTED_AMI_NAME=AMI_NAME, AWS_ACCESS_KEY_ID="AK"
    )
    assert result.returncode == 0, result.stderr
    assert record.read_text().splitlines() == [
        "args: scripts/ci/ami_gate.py check prod --tested-in staging",
        f"tested: {AMI_NAME}",
        f"role_arn = {GATE_ROLE}",
        "role_session_name = gpu-platform-ami-gate-prod",
        "profile: gate key: none",  # the container's credentials are the source
    ]


def test_script_refuses_without_a_role_or_its_two_environments(tmp_path: Path) -> None:
    no_role, record = _run_gate(tmp_path, "prod", "staging")
    assert no_role.returncode != 0 and "GATE_ROLE_ARN" in no_role.stderr
    one, _ = _run_gate(tmp_path, "prod", GATE_ROLE_ARN=GATE_ROLE)
    assert one.returncode == 2 and one.stderr == "usage: scripts/ci/ami_gate.sh <env> <tested env>\n"
    assert not record.exists()


def test_script_installs_what_the_gate_needs_at_the_pinned_versions(tmp_path: Path) -> None:
    pinned = {
        line.split("==")[0]: line for line in (ROOT / "requirements.txt").read_text().splitlines() if "==" in line
    }
    assert sorted(installed_by(GATE_SCRIPT, tmp_path)) == sorted(pinned[n] for n in ("boto3", "pydantic", "PyYAML"))
    assert os.access(ROOT / GATE_SCRIPT, os.X_OK)


@pytest.mark.parametrize("script", [GATE_SCRIPT, "scripts/ci/ami_gate.py"])
def test_help_prints_the_usage_and_runs_nothing(script: str) -> None:
    result = subprocess.run([str(ROOT / script), "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "ami_gate.py check" in result.stdout and result.stderr == ""
