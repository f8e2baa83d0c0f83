"""Pipeline steps: the synth step and the post-deploy check each run one script of the repository; the check
may assume only the target account's read-only lookup role; a person approves before the stage."""

from __future__ import annotations

from aws_cdk.assertions import Template

from gpu_constructs.pipeline.pipeline_steps import CHECK_SCRIPT, SYNTH_SCRIPT
from tests.gpu_constructs.helpers import managed_policies
from tests.gpu_constructs.pipeline.helpers import TARGET_ACCOUNT
from tests.policy_eval import Request, role_may

LOOKUP_ROLE = f"arn:aws:iam::{TARGET_ACCOUNT}:role/cdk-hnb659fds-lookup-role-{TARGET_ACCOUNT}-us-east-1"


def _buildspecs(tmpl: Template) -> list[str]:
    return [
        str(p["Properties"]["Source"].get("BuildSpec", ""))
        for p in tmpl.find_resources("AWS::CodeBuild::Project").values()
    ]


def test_steps_run_the_repositorys_scripts(pipeline_template: Template) -> None:
    specs = _buildspecs(pipeline_template)
    assert any(SYNTH_SCRIPT in s for s in specs)
    (check,) = [
        p["Properties"]
        for p in pipeline_template.find_resources("AWS::CodeBuild::Project").values()
        if f"{CHECK_SCRIPT} dev" in str(p["Properties"]["Source"].get("BuildSpec", ""))
    ]
    variables = {v["Name"]: v["Value"] for v in check["Environment"].get("EnvironmentVariables", [])}
    assert variables["CHECK_ROLE_ARN"] == LOOKUP_ROLE


def test_check_assumes_the_lookup_role_of_its_account_only(pipeline_template: Template) -> None:
    policies = managed_policies(pipeline_template)
    assert role_may(policies, None, Request("sts:AssumeRole", LOOKUP_ROLE))
    deploy_role = LOOKUP_ROLE.replace("lookup-role", "deploy-role")
    statements = [s for p in policies for s in p["Statement"] if s.get("Sid") == "AssumeReadOnlyCheckRole"]
    assert [s["Resource"] for s in statements] == [LOOKUP_ROLE]
    assert deploy_role not in str(statements)


def test_a_person_approves_before_the_stage(pipeline_template: Template) -> None:
    (pipeline,) = pipeline_template.find_resources("AWS::CodePipeline::Pipeline").values()
    (dev,) = [s for s in pipeline["Properties"]["Stages"] if s["Name"] == "dev"]
    first = min(dev["Actions"], key=lambda a: a["RunOrder"])
    assert first["ActionTypeId"]["Category"] == "Approval"
