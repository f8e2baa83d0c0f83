"""FabricCheckRole: the pipeline's fabric check in an environment. Only the FabricCheck step's role of the
tooling account may assume it; every call ``gpu-platform job fabric-test`` makes (recorded from a real run
against moto) is allowed by its policy AND the platform's permissions boundary, and nothing beside them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk import Environment, Stack, Stage
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from gpu_constructs.security.fabric_check_role import FabricCheckRole
from gpu_constructs.security.permissions_boundary import PlatformPermissionsBoundary
from ops.fabric.command import run_fabric_test
from stacks.compliance import platform_app
from tests.gpu_constructs.helpers import CDK_CONTEXT, bounded_role, trust_decision
from tests.ops.fabric.fakes import (
    ACCOUNT,
    DOCUMENT,
    GROUP,
    LOG_GROUP,
    NOW,
    REGION,
    FakeNodes,
    deploy_training,
    fabric_account,
)
from tests.ops.helpers import config_dir
from tests.policy_eval import ALLOW, Request, explain, role_may

TOOLING = "444444444444"
STEP_ROLE = f"arn:aws:iam::{TOOLING}:role/gpu-platform-pipeline-staging-fabric-check"
NAMESPACE = "GpuPlatform/staging"


@pytest.fixture(autouse=True)
def no_polling_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake nodes answer at once: the check's pause between two looks at its jobs is not waited out."""
    monkeypatch.setattr("ops.fabric.jobs.POLL_S", 0.0)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.session.Session]:
    """Staging's account in moto, as the fabric-test tests have it (tests/ops/fabric/fakes.py)."""
    with fabric_account(monkeypatch) as session:
        yield session


@pytest.fixture(scope="module")
def tmpl() -> Template:
    # In a stage named after the environment, with the boundary every role of the stage carries, as in the app.
    app = platform_app(context=CDK_CONTEXT)
    stage = Stage(app, "staging", env=Environment(account=ACCOUNT, region=REGION))
    stack = Stack(stage, "Fleets", env=Environment(account=ACCOUNT, region=REGION))
    boundary = PlatformPermissionsBoundary(
        stack, "Boundary", policy_name="gpu-platform-staging-boundary", security_group_rule_roles=["arn:aws:iam::1:x"]
    )
    FabricCheckRole(
        stack,
        "FabricCheck",
        role_name="gpu-platform-staging-fabric-check",
        trusted_account=TOOLING,
        trusted_role_name="gpu-platform-pipeline-staging-fabric-check",
        job_document_name=DOCUMENT,
        group_names=[GROUP],
        job_log_group_name=LOG_GROUP,
        metrics_namespace=NAMESPACE,
    )
    iam.PermissionsBoundary.of(stage).apply(boundary.policy)
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def policies(tmpl: Template) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the role's identity policies, the boundary)."""
    return bounded_role(tmpl, "gpu-platform-staging-fabric-check")


def test_only_the_pipelines_fabric_step_may_assume_it(tmpl: Template) -> None:
    assert trust_decision(tmpl, STEP_ROLE) == ALLOW
    for other in (
        f"arn:aws:iam::{TOOLING}:role/gpu-platform-pipeline-staging-check",  # another project of the pipeline
        f"arn:aws:iam::{TOOLING}:user/someone",
        f"arn:aws:iam::{ACCOUNT}:role/gpu-platform-pipeline-staging-fabric-check",  # same name, another account
    ):
        assert trust_decision(tmpl, other) != ALLOW, other


class Calls:
    """Every API call a boto3 session makes, as IAM authorizes it: (action, resource, context) requests."""

    def __init__(self, session: boto3.session.Session) -> None:
        self.session = session
        self.requests: list[Request] = []
        session.events.register("provide-client-params", self.record)

    def _group_tag(self, instance_id: str) -> str:
        ec2 = self.session.client("ec2")
        (reservation,) = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        tags = {t["Key"]: t["Value"] for t in reservation["Instances"][0].get("Tags", [])}
        return tags["aws:autoscaling:groupName"]

    def record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.endpoint_prefix
        service = {"monitoring": "cloudwatch"}.get(service, service)
        action = f"{service}:{model.name}"
        here = f"{REGION}:{ACCOUNT}"
        if action == "ssm:SendCommand":
            self.requests.append(Request(action, f"arn:aws:ssm:{here}:document/{params['DocumentName']}"))
            self.requests += [
                Request(
                    action,
                    f"arn:aws:ec2:{here}:instance/{i}",
                    context={"ssm:resourceTag/aws:autoscaling:groupName": self._group_tag(i)},
                )
                for i in params["InstanceIds"]
            ]
        elif action == "logs:FilterLogEvents":
            self.requests.append(Request(action, f"arn:aws:logs:{here}:log-group:{params['logGroupName']}:*"))
        elif action == "cloudwatch:PutMetricData":
            self.requests.append(Request(action, "*", context={"cloudwatch:namespace": params["Namespace"]}))
        elif action in {
            "autoscaling:DescribeAutoScalingGroups",
            "ec2:DescribeInstances",
            "ec2:DescribeImages",
            "ssm:GetCommandInvocation",
        }:
            self.requests.append(Request(action, "*"))
        else:
            raise AssertionError(f"ops/fabric calls {action}: map it to its IAM resource here and grant it")


def test_every_call_of_the_fabric_check_is_allowed(policies, aws, capsys, tmp_path: Path) -> None:
    identity, boundary = policies
    deploy_training(aws, 3)
    FakeNodes(aws)
    calls = Calls(aws)
    folder = config_dir(tmp_path, "staging")
    code = run_fabric_test("staging", "training", json_out=True, config_dir=folder, session=aws, now=lambda: NOW)
    assert code == 0, capsys.readouterr()
    actions = {r.action for r in calls.requests}
    assert actions == {
        "autoscaling:DescribeAutoScalingGroups",
        "ec2:DescribeInstances",
        "ec2:DescribeImages",  # the AMI the nodes were booted from, for the pipeline's AMI gate
        "ssm:SendCommand",
        "ssm:GetCommandInvocation",
        "logs:FilterLogEvents",
        "cloudwatch:PutMetricData",
    }
    for request in calls.requests:
        assert role_may(identity, boundary, request), (
            explain(identity, request) + " / boundary: " + explain([boundary], request)
        )


@pytest.mark.parametrize(
    "request_",
    [
        Request(
            "ssm:SendCommand",
            f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1",
            context={"ssm:resourceTag/aws:autoscaling:groupName": "gpu-platform-staging-inference"},
        ),
        Request("ssm:SendCommand", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1"),  # untagged
        Request("ssm:SendCommand", f"arn:aws:ssm:{REGION}:{ACCOUNT}:document/AWS-RunShellScript"),
        Request("ssm:SendCommand", f"arn:aws:ssm:{REGION}:{ACCOUNT}:document/gpu-platform-prod-job"),
        Request("logs:FilterLogEvents", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/gpu-platform/staging/node/x:*"),
        Request("logs:GetLogEvents", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{LOG_GROUP}:*"),
        Request("cloudwatch:PutMetricData", "*", context={"cloudwatch:namespace": "GpuPlatform/prod"}),
        Request("ssm:StartSession", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1"),
        Request("autoscaling:SetDesiredCapacity", f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:*"),
    ],
    ids=lambda r: f"{r.action}-{r.resource.rsplit(':', 1)[-1]}",
)
def test_nothing_else(policies, request_: Request) -> None:
    identity, boundary = policies
    assert not role_may(identity, boundary, request_), explain(identity, request_)
