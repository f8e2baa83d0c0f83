"""keep_default_egress_closed: a group whose egress rules all name other groups sends nothing else."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2

from gpu_constructs.network.security_groups import NO_TRAFFIC_EGRESS, keep_default_egress_closed
from tests.gpu_constructs.helpers import bare_stack, only, template, vpc


def test_group_rule_does_not_reopen_default_egress() -> None:
    stack = bare_stack()
    network = vpc(stack)
    peer = ec2.SecurityGroup(stack, "Peer", vpc=network, allow_all_outbound=False)
    group = ec2.SecurityGroup(stack, "Closed", vpc=network, allow_all_outbound=False)
    group.add_egress_rule(peer, ec2.Port.tcp(443), "to the peer")
    keep_default_egress_closed(group)
    tmpl = template(stack)
    groups = tmpl.find_resources("AWS::EC2::SecurityGroup")
    closed = next(g for lid, g in groups.items() if lid.startswith("Closed"))
    # Without the override CDK drops its placeholder once a separate egress rule exists, and a group with
    # no inline egress gets EC2's default 0.0.0.0/0 rule.
    assert closed["Properties"]["SecurityGroupEgress"] == [NO_TRAFFIC_EGRESS]
    _, rule = only(tmpl, "AWS::EC2::SecurityGroupEgress")
    assert rule["Properties"]["FromPort"] == 443
