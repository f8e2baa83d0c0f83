"""AmiGateRole: the pipeline's AMI gate in an environment. Only the AmiGate step's role of the tooling account may
assume it; every call the gate makes (recorded from a real run of scripts/ci/ami_gate.py against moto) is allowed
by its policy AND the platform's permissions boundary, and nothing beside them."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from aws_cdk import Environment, Stack, Stage
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from gpu_constructs.security.ami_gate_role import AmiGateRole
from gpu_constructs.security.permissions_boundary import PlatformPermissionsBoundary
from scripts.ci.ami_gate import check
from stacks.compliance import platform_app
from tests.gpu_constructs.helpers import CDK_CONTEXT, bounded_role, trust_decision
from tests.ops.helpers import moto_session
from tests.policy_eval import ALLOW, Request, explain, role_may

TOOLING, ACCOUNT, REGION = "444444444444", "333333333333", "us-east-1"
STEP_ROLE = f"arn:aws:iam::{TOOLING}:role/gpu-platform-pipeline-prod-ami-gate"
PARAMETER = "/imagebuilder/gpu-platform/prod/ami/latest"
PARAMETER_ARN = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{PARAMETER}"


@pytest.fixture(scope="module")
def tmpl() -> Template:
    # In a stage named after the environment, with the boundary every role of the stage carries, as in the app.
    app = platform_app(context=CDK_CONTEXT)
    stage = Stage(app, "prod", env=Environment(account=ACCOUNT, region=REGION))
    stack = Stack(stage, "Fleets", env=Environment(account=ACCOUNT, region=REGION))
    boundary = PlatformPermissionsBoundary(
        stack, "Boundary", policy_name="gpu-platform-prod-boundary", security_group_rule_roles=["arn:aws:iam::1:x"]
    )
    AmiGateRole(
        stack,
        "AmiGate",
        role_name="gpu-platform-prod-ami-gate",
        trusted_account=TOOLING,
        trusted_role_name="gpu-platform-pipeline-prod-ami-gate",
        parameter_name=PARAMETER,
    )
    iam.PermissionsBoundary.of(stage).apply(boundary.policy)
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def policies(tmpl: Template) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the role's identity policies, the boundary)."""
    return bounded_role(tmpl, "gpu-platform-prod-ami-gate")


def test_only_the_pipelines_gate_step_may_assume_it(tmpl: Template) -> None:
    assert trust_decision(tmpl, STEP_ROLE) == ALLOW
    for other in (
        f"arn:aws:iam::{TOOLING}:role/gpu-platform-pipeline-prod-fabric-check",  # another project of the pipeline
        f"arn:aws:iam::{TOOLING}:user/someone",
        f"arn:aws:iam::{ACCOUNT}:role/gpu-platform-pipeline-prod-ami-gate",  # same name, another account
    ):
        assert trust_decision(tmpl, other) != ALLOW, other


def _requests(session: boto3.session.Session) -> list[Request]:
    """Every call the session makes, as IAM authorizes it."""
    made: list[Request] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        action = f"{model.service_model.endpoint_prefix}:{model.name}"
        if action == "ssm:GetParameter":
            made.append(Request(action, f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/{params['Name'].lstrip('/')}"))
        elif action == "ec2:DescribeImages":
            made.append(Request(action, "*"))  # no resource type
        else:
            raise AssertionError(f"the gate calls {action}: map it to its IAM resource here and grant it")

    session.events.register("provide-client-params", record)
    return made


def test_every_call_of_the_gate_is_allowed(policies, monkeypatch: pytest.MonkeyPatch) -> None:
    identity, boundary = policies
    with moto_session(monkeypatch, account=ACCOUNT, region=REGION) as session:
        image = session.client("ec2").register_image(Name="golden", RootDeviceName="/dev/sda1")["ImageId"]
        session.client("ssm").put_parameter(Name=PARAMETER, Value=image, Type="String", DataType="aws:ec2:image")
        made = _requests(session)
        check(
            session.client("ssm"), session.client("ec2"), env="prod", parameter=PARAMETER, tested="golden",
            tested_in="staging",
        )  # fmt: skip
    assert {r.action for r in made} == {"ssm:GetParameter", "ec2:DescribeImages"}
    for request in made:
        assert role_may(identity, boundary, request), explain(identity, request)


@pytest.mark.parametrize(
    "request_",
    [
        Request("ssm:GetParameter", PARAMETER_ARN.replace("/prod/", "/staging/")),
        Request("ssm:GetParameter", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/gpu-platform/prod/fsx-id"),
        Request("ssm:GetParameters", PARAMETER_ARN),
        Request("ssm:PutParameter", PARAMETER_ARN),
        Request("ec2:DescribeInstances", "*"),
        Request("ec2:CopyImage", "*"),
        Request("ec2:DeregisterImage", f"arn:aws:ec2:{REGION}::image/ami-1"),
    ],
    ids=lambda r: f"{r.action}-{r.resource.rsplit('/', 1)[-1]}",
)
def test_nothing_else(policies, request_: Request) -> None:
    identity, boundary = policies
    assert not role_may(identity, boundary, request_), explain(identity, request_)
