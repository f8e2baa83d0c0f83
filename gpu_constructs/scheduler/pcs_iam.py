"""What IAM must say for AWS PCS: the role and instance profile a PCS node launches with, and its registration.

An instance profile of a compute node group holds a role whose name starts with ``AWSPCS`` or whose path is
``/aws-pcs/``, with ``pcs:RegisterComputeNodeGroupInstance`` (PCS API reference, CreateComputeNodeGroup,
``iamInstanceProfileArn``; AWS PCS User Guide, "IAM instance profiles for AWS PCS"). The platform's roles have
generated names, so the path is what it sets.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

#: The IAM path of every role (and instance profile) a PCS node launches with.
PCS_ROLE_PATH = "/aws-pcs/"


def pcs_cluster_arns(stack: Stack) -> str:
    """Every PCS cluster of the stack's account and region: a node registers with the cluster of its node group,
    whose id PCS generates (and a role in the security stack cannot name a cluster of the fleet stack)."""
    return f"arn:{stack.partition}:pcs:{stack.region}:{stack.account}:cluster/*"


def pcs_registration_statement(stack: Stack) -> iam.PolicyStatement:
    """The one call a PCS node makes to join its cluster (the Service Authorization Reference gives it the
    ``cluster`` resource type)."""
    return iam.PolicyStatement(
        sid="RegisterWithThisAccountsPcsClusters",
        actions=["pcs:RegisterComputeNodeGroupInstance"],
        resources=[pcs_cluster_arns(stack)],
    )
