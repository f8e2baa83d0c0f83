"""IAM actions and statements more than one policy of the platform grants or caps."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

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
