"""The permissions boundary every role of the platform carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpu_constructs.acknowledge import acknowledge
from gpu_constructs.iam_actions import SSM_AGENT_CHANNELS

#: The most any role of the platform may ever do, by service. A role's own
#: policies grant a subset of this; the boundary stops a widened role policy or a
#: misused role from reaching IAM, Organizations, CloudTrail configuration, key
#: policies, bucket policies or security group ingress. Its only IAM action,
#: iam:PassRole, is in statements of its own: named roles, each to one service.
BOUNDARY_ACTIONS = [
    # Session Manager and node registration
    "ssm:UpdateInstanceInformation",
    "ssm:GetParameter",
    "ssm:GetParameters",
    "ssm:GetParametersByPath",
    *SSM_AGENT_CHANNELS,
    # logs and metrics
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "logs:DescribeLogGroups",
    "logs:DescribeLogStreams",
    "cloudwatch:PutMetricData",
    # data
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListBucket",
    "s3:GetBucketLocation",
    "kms:Decrypt",
    "kms:Encrypt",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:DescribeKey",
    # fleets: lifecycle hooks and health
    "autoscaling:CompleteLifecycleAction",
    "autoscaling:RecordLifecycleActionHeartbeat",
    "autoscaling:SetInstanceHealth",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeAutoScalingGroups",
    # read-only describes
    "ec2:DescribeInstances",
    "ec2:DescribeTags",
    "ec2:DescribeVolumes",
    "ec2:DescribeSecurityGroups",
    "fsx:DescribeFileSystems",
    # the golden AMI's build instance fetches its components
    "imagebuilder:GetComponent",
    # a receiving environment's EC2ImageBuilderDistributionCrossAccountRole copies the AMI,
    # tags the copy, writes its id and uses the source snapshots' key through EC2
    "ec2:CopyImage",
    "ec2:CreateTags",
    "ec2:DescribeImages",
    "ec2:ModifyImageAttribute",
    "ssm:PutParameter",
    "kms:CreateGrant",
    # CDK's custom resource that strips the VPC's default security group
    "ec2:RevokeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupEgress",
    # AMI rollout: EventBridge starts the runbook; the runbook versions the fleets' launch templates
    # and starts their instance refreshes (launching and passing roles: the statements below)
    "ssm:StartAutomationExecution",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:CreateLaunchTemplateVersion",
    "autoscaling:StartInstanceRefresh",
]


@dataclass(frozen=True)
class PassRoleGrant:
    """The only roles a platform role may pass, each to one service only."""

    sid: str
    role_arns: Sequence[str]
    service: str
    #: Why an ARN with a wildcard names only the intended role (required where one has a ``*``).
    wildcard_reason: str = ""


class PlatformPermissionsBoundary(Construct):
    """A named customer-managed policy used as permissions boundary.

    Attributes:
        policy: the managed policy; ``iam.PermissionsBoundary.of(scope).apply(policy)``.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, policy_name: str, pass_roles: Sequence[PassRoleGrant] = ()
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        templates = f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:launch-template/*"
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            managed_policy_name=policy_name,
            description="Permissions boundary of every GPU platform role: the most any of them may do",
            statements=[
                iam.PolicyStatement(
                    sid="PlatformCeiling",
                    actions=sorted(BOUNDARY_ACTIONS),
                    resources=["*"],
                ),
                # Auto Scaling lets a caller point a group at a launch template only if the caller could
                # launch from it; no role may launch any other way, or tag anything but a launch.
                iam.PolicyStatement(
                    sid="LaunchOnlyThroughLaunchTemplates",
                    actions=["ec2:RunInstances"],
                    resources=["*"],
                    conditions={
                        "ArnLike": {"ec2:LaunchTemplate": templates},
                        "Bool": {"ec2:IsLaunchTemplateResource": "true"},
                    },
                ),
                iam.PolicyStatement(
                    sid="TagOnlyOnLaunch",
                    actions=["ec2:CreateTags"],
                    resources=["*"],
                    conditions={"StringEquals": {"ec2:CreateAction": "RunInstances"}},
                ),
                *(
                    iam.PolicyStatement(
                        sid=grant.sid,
                        actions=["iam:PassRole"],
                        resources=list(grant.role_arns),
                        conditions={"StringEquals": {"iam:PassedToService": grant.service}},
                    )
                    for grant in pass_roles
                ),
            ],
        )
        for grant in pass_roles:
            for role_arn in grant.role_arns:
                if "*" in role_arn:
                    acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{role_arn}]", grant.wildcard_reason)
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5[Resource::*]",
            "This policy is only a permissions boundary: it grants nothing, it caps each role, whose own "
            "policies scope the resources.",
        )
