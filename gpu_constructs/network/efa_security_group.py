"""The EFA security group: all traffic to and from its own members, nothing else."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.network.security_groups import members_only


class EfaSecurityGroup(Construct):
    """Security group for EFA interfaces.

    EFA's OS-bypass traffic needs every protocol and port open between the
    members of one group (AWS EFA user guide: "allows all inbound and outbound
    traffic to and from the security group itself"). It admits nothing else and
    sends nothing elsewhere; nodes reach other destinations through a second group.

    Attributes:
        security_group: the group.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="EFA: all traffic between members of this group only",
            allow_all_outbound=False,
        )
        members_only(
            self.security_group, ec2.Port.all_traffic(), ingress="EFA from group members", egress="EFA to group members"
        )
        acknowledge(
            self.security_group,
            "NIST.800.53.R5-EC2RestrictedCommonPorts",
            "The only ingress rule's source is this EFA group itself (no CIDR): EFA needs every protocol "
            "and port between the nodes of one training job, and nothing outside the group is admitted.",
        )
