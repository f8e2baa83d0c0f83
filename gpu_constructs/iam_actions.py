"""IAM action lists more than one policy of the platform grants or caps."""

from __future__ import annotations

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
