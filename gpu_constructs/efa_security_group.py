"""The EFA security group: all traffic to and from its own members, nothing else."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from gpu_constructs.acknowledge import acknowledge

#: An egress rule that matches no packet (ICMP type 252 code 86 to the broadcast
#: address), the same placeholder CDK uses for "allow no outbound traffic".
NO_TRAFFIC_EGRESS = {
    "CidrIp": "255.255.255.255/32",
    "Description": "Disallow all traffic",
    "FromPort": 252,
    "IpProtocol": "icmp",
    "ToPort": 86,
}


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
        self.security_group.add_ingress_rule(self.security_group, ec2.Port.all_traffic(), "EFA from group members")
        self.security_group.add_egress_rule(self.security_group, ec2.Port.all_traffic(), "EFA to group members")
        # The self-referencing rules are separate resources, and CDK drops its
        # "no traffic" placeholder once any egress rule exists. A group without an
        # inline SecurityGroupEgress gets EC2's default allow-all egress, so keep the
        # placeholder inline: the group then sends to its own members only.
        cfn_group: ec2.CfnSecurityGroup = self.security_group.node.default_child
        cfn_group.add_property_override("SecurityGroupEgress", [NO_TRAFFIC_EGRESS])
        acknowledge(
            self.security_group,
            "NIST.800.53.R5-EC2RestrictedCommonPorts",
            "The only ingress rule's source is this EFA group itself (no CIDR): EFA needs every protocol "
            "and port between the nodes of one training job, and nothing outside the group is admitted.",
        )
