"""The fabric check as an opt-in step of the post-deploy check: ``fabric_check`` of pipeline.yaml, through the
synthesized pipeline (the FabricCheck action after the read-only check, its project role, the role it assumes,
the AMI it exports) to the environment's Fleets stack (that role, trusting the project role only). The step's
script: tests/pipeline/test_fabric_check_script.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import app as cdk_app
from config import ConfigError, load_environment
from config.pipeline_schema import PIPELINE_FILE, fabric_check_trust
from gpu_constructs.pipeline.pipeline_steps import (
    FABRIC_AMI_FILE,
    FABRIC_AMI_VARIABLE,
    FABRIC_RUN_TIMEOUT_S,
    FABRIC_SCRIPT,
)
from stacks.compliance import platform_app
from stacks.pipeline_stack import PIPELINE_STACK_NAME
from tests.app_runs import run_app_process
from tests.config.helpers import assert_config_failure
from tests.iam_documents import Resolver
from tests.ops.helpers import config_dir
from tests.pipeline.test_pipeline_config import valid_pipeline
from tests.policy_eval import ALLOW, Request, decide, explain
from tests.role_policies import roles
from tests.synth import build_once, cdk_json_context, collect_stacks, synth_context
from tests.unit.test_role_boundaries import _requests

TOOLING = "444444444444"
STAGING = "222222222222"  # tests/fixtures/config/staging.yaml
STEP_ROLE_NAME = "gpu-platform-pipeline-staging-fabric-check"
ENV_ROLE = f"arn:aws:iam::{STAGING}:role/gpu-platform-staging-fabric-check"


def with_pipeline(folder: Path, **changes: Any) -> Path:
    path = folder / PIPELINE_FILE
    path.parent.mkdir(exist_ok=True)
    data = {**valid_pipeline(), "account": TOOLING, "manual_approval": [], **changes}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder


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
        f"{PIPELINE_FILE}: fabric_check[1]: 'staging' has no training fleet to check; fix: remove it from "
        "fabric_check, or add a fleet with role: training to config/staging.yaml"
    ]


def test_the_app_exits_2_with_that_line(tmp_path: Path) -> None:
    folder = with_pipeline(config_dir(tmp_path, "dev", change=_no_training), fabric_check=["dev"])
    # Found while the stages are built: the process the CLI starts shows it alone on stderr.
    result = run_app_process({**cdk_json_context(), "env": "dev", "config_dir": str(folder)}, tmp_path / "out")
    assert_config_failure(
        result,
        f"{folder / PIPELINE_FILE}: fabric_check[0]: 'dev' has no training fleet to check; fix: remove it from "
        "fabric_check, or add a fleet with role: training to config/dev.yaml",
    )


# --- the synthesized pipeline and environment ---------------------------------------------------------------


@pytest.fixture(scope="module")
def synth(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``cdk synth -c pipeline=true`` of dev, staging, prod: the fabric check on staging only, prod approved by a
    person and gated on staging's tested AMI (tests/pipeline/test_ami_gate_step.py)."""
    tmp = tmp_path_factory.mktemp("fabric")
    folder = with_pipeline(config_dir(tmp), fabric_check=["staging"], manual_approval=["prod"], ami_gate=["prod"])
    context = {**synth_context(), "pipeline": "true", "config_dir": str(folder)}

    def build(outdir: Path) -> None:
        app = platform_app(context=context, outdir=str(outdir))
        cdk_app.build(app)
        app.synth()

    outdir = build_once(pytestconfig, tmp_path_factory, "fabric-pipeline.out", build)
    environments = [load_environment(name, folder) for name in ("dev", "staging", "prod")]
    envs = collect_stacks(outdir, environments)
    return {
        "pipeline": json.loads((outdir / f"{PIPELINE_STACK_NAME}.template.json").read_text()),
        **{env.name: envs.stack(env.name, "Fleets").json for env in environments},
        "synth": envs,
    }


def _by_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _actions(pipeline: dict[str, Any], stage: str) -> list[dict[str, Any]]:
    (code_pipeline,) = _by_type(pipeline, "AWS::CodePipeline::Pipeline").values()
    return next(s for s in code_pipeline["Properties"]["Stages"] if s["Name"] == stage)["Actions"]


def test_the_fabric_step_runs_after_the_read_only_check_of_that_environment_only(synth) -> None:
    actions = {a["Name"]: a for a in _actions(synth["pipeline"], "staging")}
    assert actions["FabricCheck"]["RunOrder"] > actions["PostDeployCheck"]["RunOrder"]
    assert "FabricCheck" not in {a["Name"] for a in _actions(synth["pipeline"], "dev")}
    project = synth["pipeline"]["Resources"][actions["FabricCheck"]["Configuration"]["ProjectName"]["Ref"]]
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


def test_the_step_role_assumes_the_environment_role_which_trusts_it_alone(synth) -> None:
    pipeline = synth["pipeline"]
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
        for r in _by_type(synth["staging"], "AWS::IAM::Role").values()
        if r["Properties"].get("RoleName") == "gpu-platform-staging-fabric-check"
    ]
    trust = Resolver(synth["staging"], account=STAGING, region="us-east-1").resolve(
        env_role["AssumeRolePolicyDocument"]
    )

    def assume(caller: str) -> str:
        request = Request("sts:AssumeRole", "*", {"AWS": caller}, context={"aws:PrincipalArn": caller})
        return decide([trust], request, resource_policy=True)

    assert assume(step_arn) == ALLOW
    assert assume(f"arn:aws:iam::{TOOLING}:role/{check_role}") != ALLOW
    assert not [
        r
        for r in _by_type(synth["dev"], "AWS::IAM::Role").values()
        if "fabric-check" in str(r["Properties"].get("RoleName", ""))
    ]


def test_the_role_is_inside_the_boundary_of_its_environment(synth) -> None:
    """As tests/unit/test_role_boundaries.py checks every role of the shipped-off fixture environments."""
    cfg = synth["synth"].environments["staging"]
    (role,) = [r for r in roles(synth["synth"], "staging") if r.arn == ENV_ROLE]
    requests = _requests(role, cfg.account, cfg.region)
    assert {r.action for r, _ in requests} >= {"ssm:SendCommand", "logs:FilterLogEvents", "cloudwatch:PutMetricData"}
    for request, sid in requests:
        assert decide([role.boundary], request) == ALLOW, f"{sid}: " + explain([role.boundary], request)
