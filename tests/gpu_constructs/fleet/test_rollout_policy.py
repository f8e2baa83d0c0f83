"""rollout_statements: the AMI rollout runbook's role reads the AMI parameter, versions only the fleets' launch
templates, refreshes only their groups and launches only through those templates; acknowledge_rollout_wildcards
accepts each IAM5 wildcard of those statements by name, and no other."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack, Validations
from aws_cdk import aws_iam as iam

from gpu_constructs.fleet.rollout_policy import StackArns, acknowledge_rollout_wildcards, rollout_statements
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack
from tests.policy_eval import Request, role_may

PARAMETER = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/ami"
TEMPLATE = f"arn:aws:ec2:{REGION}:{ACCOUNT}:launch-template/lt-0aaa"
GROUPS = f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:*:autoScalingGroupName/"
GROUP = f"{GROUPS}gpu-platform-dev-train"
NODE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/node"
INSTANCE = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0123"


def _statements(arns: StackArns) -> list[iam.PolicyStatement]:
    return rollout_statements(
        arns, parameter_arn=PARAMETER, template_arns=[TEMPLATE], group_arns=[GROUP], node_role_arn=NODE_ROLE
    )


def _document(stack: Stack) -> dict[str, Any]:
    document = iam.PolicyDocument(statements=_statements(StackArns.of(stack)))
    resolved: dict[str, Any] = stack.resolve(document.to_json())
    return resolved


def test_arns_name_the_stacks_partition_region_and_account() -> None:
    arns = StackArns.of(bare_stack())
    assert arns.arn("ssm", "parameter/ami") == PARAMETER
    assert arns.launched_resources == [
        f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/*",
        f"arn:aws:ec2:{REGION}:{ACCOUNT}:volume/*",
    ]


def test_role_reads_the_parameter_and_versions_and_refreshes_only_the_fleets() -> None:
    policy = _document(bare_stack())
    assert role_may([policy], None, Request("ssm:GetParameter", PARAMETER))
    assert not role_may([policy], None, Request("ssm:GetParameter", PARAMETER + "-other"))
    assert role_may([policy], None, Request("ec2:CreateLaunchTemplateVersion", TEMPLATE))
    assert not role_may([policy], None, Request("ec2:CreateLaunchTemplateVersion", TEMPLATE.replace("0aaa", "0bbb")))
    group = GROUP.replace("*", "uuid")
    assert role_may([policy], None, Request("autoscaling:StartInstanceRefresh", group))
    assert not role_may([policy], None, Request("autoscaling:StartInstanceRefresh", f"{group}-other"))


def test_role_launches_only_through_the_fleet_templates() -> None:
    policy = _document(bare_stack())
    launch = {"ec2:LaunchTemplate": TEMPLATE, "ec2:IsLaunchTemplateResource": True}
    assert role_may([policy], None, Request("ec2:RunInstances", "*", context=launch))
    assert not role_may([policy], None, Request("ec2:RunInstances", "*"))
    other = {**launch, "ec2:LaunchTemplate": TEMPLATE.replace("0aaa", "0bbb")}
    assert not role_may([policy], None, Request("ec2:RunInstances", "*", context=other))
    on_launch = {"ec2:CreateAction": "RunInstances"}
    assert role_may([policy], None, Request("ec2:CreateTags", INSTANCE, context=on_launch))
    assert not role_may([policy], None, Request("ec2:CreateTags", INSTANCE))
    to_ec2 = {"iam:PassedToService": "ec2.amazonaws.com"}
    assert role_may([policy], None, Request("iam:PassRole", NODE_ROLE, context=to_ec2))
    assert not role_may([policy], None, Request("iam:PassRole", NODE_ROLE, context={"iam:PassedToService": "x"}))


def test_each_wildcard_is_acknowledged_by_name() -> None:
    stack = bare_stack()
    arns = StackArns.of(stack)
    policy = iam.ManagedPolicy(stack, "Rollout", statements=_statements(arns))
    acknowledge_rollout_wildcards(policy, arns, [GROUP])
    acknowledged = {
        rule.removeprefix("Annotation::")  # how CDK keys an acknowledged rule in the construct's metadata
        for m in policy.node.metadata
        if m.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for rule in m.data
    }
    assert acknowledged == {
        f"AwsSolutions-IAM5[Resource::{resource}]" for resource in ("*", GROUP, *arns.launched_resources)
    }
