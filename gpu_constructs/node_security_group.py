"""The security group every GPU node carries, EFA or not."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


class NodeSecurityGroup(Construct):
    """Admits nothing by default; nodes reach AWS APIs, S3 and FSx outbound.

    Other stacks add the few ingress rules a node needs (Lustre callbacks from
    the file system's group). Outbound is open: in isolated environments the
    route tables offer no way out but the VPC endpoints and the S3 gateway.

    Attributes:
        security_group.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="GPU nodes: no ingress but from platform groups; outbound to AWS APIs, S3, FSx",
            allow_all_outbound=True,
        )
