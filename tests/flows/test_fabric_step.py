"""The fabric check as an opt-in step of the post-deploy check: ``fabric_check`` of pipeline.yaml, through the
synthesized pipeline (the FabricCheck action after the read-only check, its project role, the role it assumes,
the AMI it exports) to the environment's Fleets stack (that role, trusting the project role only). The step's
script: tests/scripts/ci/test_fabric_check.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config import ConfigError, load_environment
from config.pipeline_schema import PIPELINE_FILE, fabric_check_trust
from gpu_constructs.pipeline.pipeline_steps import (
    FABRIC_AMI_FILE,
    FABRIC_AMI_VARIABLE,
    FABRIC_RUN_TIMEOUT_S,
    FABRIC_SCRIPT,
)
from tests.app_runs import run_app_process
from tests.config.helpers import assert_config_failure
from tests.flows.checked_pipeline import TOOLING, with_pipeline
from tests.flows.checked_pipeline import actions as _actions
from tests.flows.checked_pipeline import by_type as _by_type
from tests.iam_documents import Resolver
from tests.ops.helpers import config_dir
from tests.policy_eval import ALLOW, Request, decide, explain
from tests.role_policies import granted_requests as _requests
from tests.role_policies import roles
from tests.synth import cdk_json_context

STAGING = "222222222222"  # tests/fixtures/config/staging.yaml
STEP_ROLE_NAME = "gpu-platform-pipeline-staging-fabric-check"
ENV_ROLE = f"arn:aws:iam::{STAGING}:role/gpu-platform-staging-fabric-check"


def _no_training(doc: dict[str, Any]) -> None:
    doc["fleets"] = [f for f in doc["fleets"] if f.get("role") != "training"]


# --- which environments get the role ------------------------------------------------------------------------


def test_trust_only_where_the_pipeline_lists_the_environment(tmp_path: Path) -> None:
    folder = config_dir(tmp_path)
    staging, dev = load_environment("staging", folder), load_environment("dev", folder)
    assert fabric_check_trust(staging, folder) is None  # no pipeline file: a laptop config without a pipeline
    with_pipeline(folder, fabric_check=[])
    assert fabric_check_trust(staging, folder) is None  # the default: off
    with_pipeline(folder, fabric_check=["staging"])
    trust = fabric_check_trust(staging, folder)
    assert trust is not None and (trust.account, trust.role_name) == (TOOLING, STEP_ROLE_NAME)
    assert fabric_check_trust(dev, folder) is None


def test_an_environment_without_a_training_fleet_is_one_line(tmp_path: Path, monkeypatch) -> None:
    folder = with_pipeline(config_dir(tmp_path, "staging", change=_no_training), fabric_check=["dev", "staging"])
    monkeypatch.chdir(folder)
    with pytest.raises(ConfigError) as info:
        fabric_check_trust(load_environment("staging", folder), folder)
    assert info.value.lines == [
        f"{PIPELINE_FILE}: fabric_check[1]: 'staging' has no training fleet to check (on an Auto Scaling group: a Slurm "
        "fleet's fabric is tested as a Slurm job); fix: remove it from "
        "fabric_check, or add a fleet with role: training to config/staging.yaml"
    ]


def test_the_app_exits_2_with_that_line(tmp_path: Path) -> None:
    folder = with_pipeline(config_dir(tmp_path, "dev", change=_no_training), fabric_check=["dev"])
    # Found while the stages are built: the process the CLI starts shows it alone on stderr.
    result = run_app_process({**cdk_json_context(), "env": "dev", "config_dir": str(folder)}, tmp_path / "out")
    assert_config_failure(
        result,
        f"{folder / PIPELINE_FILE}: fabric_check[0]: 'dev' has no training fleet to check (on an Auto Scaling group: a Slurm "
        "fleet's fabric is tested as a Slurm job); fix: remove it from "
        "fabric_check, or add a fleet with role: training to config/dev.yaml",
    )


# --- the synthesized pipeline and environment ---------------------------------------------------------------


def test_the_fabric_step_runs_after_the_read_only_check_of_that_environment_only(checked_synth) -> None:
    actions = {a["Name"]: a for a in _actions(checked_synth["pipeline"], "staging")}
    assert actions["FabricCheck"]["RunOrder"] > actions["PostDeployCheck"]["RunOrder"]
    assert "FabricCheck" not in {a["Name"] for a in _actions(checked_synth["pipeline"], "dev")}
    project = checked_synth["pipeline"]["Resources"][actions["FabricCheck"]["Configuration"]["ProjectName"]["Ref"]]
    spec = json.loads(project["Properties"]["Source"]["BuildSpec"])
    assert spec["phases"]["build"]["commands"] == [
        f"{FABRIC_SCRIPT} staging training",
        f'export {FABRIC_AMI_VARIABLE}="$(cat "$FABRIC_AMI_FILE")"',
    ]
    assert spec["env"]["exported-variables"] == [FABRIC_AMI_VARIABLE]
    env = {v["Name"]: v["Value"] for v in project["Properties"]["Environment"]["EnvironmentVariables"]}
    assert env["FABRIC_ROLE_ARN"] == ENV_ROLE
    assert env["FABRIC_RUN_TIMEOUT_S"] == str(FABRIC_RUN_TIMEOUT_S)
    assert env["FABRIC_AMI_FILE"] == FABRIC_AMI_FILE
    assert project["Properties"]["TimeoutInMinutes"] == 15 + 4 * (FABRIC_RUN_TIMEOUT_S + 300) // 60


def test_the_step_role_assumes_the_environment_role_which_trusts_it_alone(checked_synth) -> None:
    pipeline = checked_synth["pipeline"]
    actions = {a["Name"]: a for a in _actions(pipeline, "staging")}
    project = pipeline["Resources"][actions["FabricCheck"]["Configuration"]["ProjectName"]["Ref"]]
    role_id = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    role = pipeline["Resources"][role_id]["Properties"]
    assert role["RoleName"] == STEP_ROLE_NAME
    resolver = Resolver(pipeline, account=TOOLING, region="us-east-1")
    policies = [
        resolver.resolve(p["Properties"]["PolicyDocument"])
        for p in _by_type(pipeline, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    step_arn = f"arn:aws:iam::{TOOLING}:role/{STEP_ROLE_NAME}"
    assert decide(policies, Request("sts:AssumeRole", ENV_ROLE)) == ALLOW
    # The read-only check's project may not assume it.
    check = pipeline["Resources"][actions["PostDeployCheck"]["Configuration"]["ProjectName"]["Ref"]]
    check_role = check["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    check_policies = [
        resolver.resolve(p["Properties"]["PolicyDocument"])
        for p in _by_type(pipeline, "AWS::IAM::Policy").values()
        if {"Ref": check_role} in p["Properties"]["Roles"]
    ]
    assert decide(check_policies, Request("sts:AssumeRole", ENV_ROLE)) != ALLOW

    (env_role,) = [
        r["Properties"]
        for r in _by_type(checked_synth["staging"], "AWS::IAM::Role").values()
        if r["Properties"].get("RoleName") == "gpu-platform-staging-fabric-check"
    ]
    trust = Resolver(checked_synth["staging"], account=STAGING, region="us-east-1").resolve(
        env_role["AssumeRolePolicyDocument"]
    )

    def assume(caller: str) -> str:
        request = Request("sts:AssumeRole", "*", {"AWS": caller}, context={"aws:PrincipalArn": caller})
        return decide([trust], request, resource_policy=True)

    assert assume(step_arn) == ALLOW
    assert assume(f"arn:aws:iam::{TOOLING}:role/{check_role}") != ALLOW
    assert not [
        r
        for r in _by_type(checked_synth["dev"], "AWS::IAM::Role").values()
        if "fabric-check" in str(r["Properties"].get("RoleName", ""))
    ]


def test_the_role_is_inside_the_boundary_of_its_environment(checked_synth) -> None:
    """As tests/flows/test_role_boundaries.py checks every role of the shipped-off fixture environments."""
    cfg = checked_synth["synth"].environments["staging"]
    (role,) = [r for r in roles(checked_synth["synth"], "staging") if r.arn == ENV_ROLE]
    requests = _requests(role, cfg.account, cfg.region)
    assert {r.action for r, _ in requests} >= {"ssm:SendCommand", "logs:FilterLogEvents", "cloudwatch:PutMetricData"}
    for request, sid in requests:
        assert decide([role.boundary], request) == ALLOW, f"{sid}: " + explain([role.boundary], request)
