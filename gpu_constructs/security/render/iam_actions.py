"""IAM actions and statements more than one policy of the platform grants or caps."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from gpu_constructs.compliance.acknowledge import acknowledge

#: The SSM agent's channel calls (Session Manager and Run Command): no resource types,
#: so they are granted on "*" and held to the region by ``aws:RequestedRegion``.
SSM_AGENT_CHANNELS = (
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
    "ec2messages:AcknowledgeMessage",
    "ec2messages:DeleteMessage",
    "ec2messages:FailMessage",
    "ec2messages:GetEndpoint",
    "ec2messages:GetMessages",
    "ec2messages:SendReply",
)


def ssm_agent_statements(stack: Stack, *, channels_sid: str) -> list[iam.PolicyStatement]:
    """What the SSM agent on an instance of ``stack``'s account and region needs: its channels
    (``channels_sid`` names that statement) and registering its own instance."""
    return [
        iam.PolicyStatement(
            sid=channels_sid,
            actions=list(SSM_AGENT_CHANNELS),
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": stack.region}},
        ),
        iam.PolicyStatement(
            sid="RegisterInstance",
            actions=["ssm:UpdateInstanceInformation"],
            resources=[f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:instance/*"],
        ),
    ]


def session_manager_statements(
    stack: Stack, *, session_log_group_arn: str, logs_key_arn: str
) -> list[iam.PolicyStatement]:
    """An instance people reach through Session Manager: the agent's channels and registration, the session log
    group (its streams, and the encryption check Session Manager makes) and the logs key of encrypted sessions."""
    return [
        *ssm_agent_statements(stack, channels_sid="SessionChannels"),
        iam.PolicyStatement(
            sid="SessionLogs",
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[session_log_group_arn],
        ),
        iam.PolicyStatement(
            sid="SessionLogGroupEncryptionCheck",
            actions=["logs:DescribeLogGroups"],  # lists groups: no resource-level scoping
            resources=["*"],
        ),
        iam.PolicyStatement(
            sid="SessionDataKey",
            actions=["kms:Decrypt", "kms:GenerateDataKey"],
            resources=[logs_key_arn],
        ),
    ]


def acknowledge_session_manager(policy: IConstruct, stack: Stack) -> None:
    """The rule-pack findings on a policy of ``session_manager_statements``, with why each does not apply."""
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        "ssmmessages/ec2messages channel calls and logs:DescribeLogGroups have no resource types (Service "
        "Authorization Reference); the channel statement is held to this region by aws:RequestedRegion, and "
        "DescribeLogGroups only reads, so Session Manager can check that its log group is encrypted.",
    )
    acknowledge(
        policy,
        f"AwsSolutions-IAM5[Resource::arn:{stack.partition}:ec2:{stack.region}:{stack.account}:instance/*]",
        "The instance registers itself; its own id is not known when the role is created.",
    )
