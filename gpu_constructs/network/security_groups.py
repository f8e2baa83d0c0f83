"""Helpers for security groups whose rules all name other groups."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2

from gpu_constructs.compliance.cfn_child import cfn_child

#: An egress rule that matches no packet (ICMP type 252 code 86 to the broadcast
#: address), the same placeholder CDK uses for "allow no outbound traffic".
NO_TRAFFIC_EGRESS = {
    "CidrIp": "255.255.255.255/32",
    "Description": "Disallow all traffic",
    "FromPort": 252,
    "IpProtocol": "icmp",
    "ToPort": 86,
}


def keep_default_egress_closed(group: ec2.SecurityGroup) -> None:
    """Stop EC2 from giving ``group`` its default allow-all egress rule.

    Rules that reference a group are separate resources, and CDK drops its
    "no traffic" placeholder once any egress rule exists. A group without an
    inline SecurityGroupEgress gets EC2's default 0.0.0.0/0 egress, so the
    placeholder is kept inline: the group then sends only what its rules allow.
    """
    cfn_group = cfn_child(group, ec2.CfnSecurityGroup)
    cfn_group.add_property_override("SecurityGroupEgress", [NO_TRAFFIC_EGRESS])


def members_only(group: ec2.SecurityGroup, port: ec2.Port, *, ingress: str, egress: str) -> None:
    """``port`` in from and out to the group's own members, and nothing else (the EFA and training groups)."""
    group.add_ingress_rule(group, port, ingress)
    group.add_egress_rule(group, port, egress)
    # Both rules name the group itself, so CDK makes them separate resources: keep EC2's default
    # allow-all egress off the group.
    keep_default_egress_closed(group)
