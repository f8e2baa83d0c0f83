"""What the AMI rollout runbook's role may do (``AmiRollout``): the statements of its policy and the findings
acknowledged on them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from gpu_constructs.compliance.acknowledge import acknowledge


@dataclass(frozen=True)
class StackArns:
    """ARNs in one stack's partition, Region and account."""

    partition: str
    region: str
    account: str

    @classmethod
    def of(cls, stack: Stack) -> StackArns:
        return cls(partition=stack.partition, region=stack.region, account=stack.account)

    def arn(self, service: str, resource: str) -> str:
        """``arn:<partition>:<service>:<region>:<account>:<resource>``."""
        return f"arn:{self.partition}:{service}:{self.region}:{self.account}:{resource}"

    @property
    def launched_resources(self) -> list[str]:
        """Every instance and volume: what RunInstances creates and tags."""
        return [self.arn("ec2", "instance/*"), self.arn("ec2", "volume/*")]


def rollout_statements(
    arns: StackArns,
    *,
    parameter_arn: str,
    template_arns: Sequence[str],
    group_arns: Sequence[str],
    node_role_arn: str,
) -> list[iam.PolicyStatement]:
    """Read the AMI parameter, new versions of the fleets' launch templates and instance refreshes of their
    groups, with what Auto Scaling checks that the caller could launch from those templates itself."""
    return [
        iam.PolicyStatement(sid="ReadAmiParameter", actions=["ssm:GetParameter"], resources=[parameter_arn]),
        iam.PolicyStatement(
            sid="ReadGroupsAndTemplates",
            actions=["autoscaling:DescribeAutoScalingGroups", "ec2:DescribeLaunchTemplateVersions"],
            resources=["*"],
        ),
        iam.PolicyStatement(
            sid="NewFleetTemplateVersions", actions=["ec2:CreateLaunchTemplateVersion"], resources=list(template_arns)
        ),
        iam.PolicyStatement(
            sid="RefreshFleetGroups", actions=["autoscaling:StartInstanceRefresh"], resources=list(group_arns)
        ),
        # Auto Scaling checks that whoever points a group at a launch template could launch from
        # it: RunInstances, tags on launch, the instance profile's role.
        iam.PolicyStatement(
            sid="LaunchOnlyThroughFleetTemplates",
            actions=["ec2:RunInstances"],
            resources=["*"],
            conditions={
                "ArnLike": {"ec2:LaunchTemplate": list(template_arns)},
                "Bool": {"ec2:IsLaunchTemplateResource": "true"},
            },
        ),
        iam.PolicyStatement(
            sid="TagOnLaunchOnly",
            actions=["ec2:CreateTags"],
            resources=arns.launched_resources,
            conditions={"StringEquals": {"ec2:CreateAction": "RunInstances"}},
        ),
        iam.PolicyStatement(
            sid="PassNodeRoleToEc2",
            actions=["iam:PassRole"],
            resources=[node_role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
    ]


def acknowledge_rollout_wildcards(policy: iam.ManagedPolicy, arns: StackArns, group_arns: Sequence[str]) -> None:
    """The wildcards of ``rollout_statements``, each with why it is held to the fleets."""
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        "DescribeAutoScalingGroups and DescribeLaunchTemplateVersions take no resource (Service Authorization "
        "Reference) and only read; RunInstances on * is held by conditions to launches through this "
        "environment's fleet launch templates, with only the templates' own resources.",
    )
    for wildcard in (*group_arns, *arns.launched_resources):
        acknowledge(
            policy,
            f"AwsSolutions-IAM5[Resource::{wildcard}]",
            "A group ARN carries a random id (the * before autoScalingGroupName), the group is named exactly; "
            "instances and volumes are tagged only as RunInstances creates them (ec2:CreateAction).",
        )
