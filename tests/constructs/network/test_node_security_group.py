"""NodeSecurityGroup: no ingress of its own; outbound HTTPS to endpoints and S3, Lustre in the VPC, and the
internet only with NAT; with training traffic, TCP on the unprivileged ports between its members."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from gpu_constructs.network.node_security_group import TRAINING_TCP_PORTS, NodeSecurityGroup
from tests.constructs.conftest import VPC_CIDR, bare_stack, group_id, sg_rules, template, vpc

S3_PREFIX_LIST = "pl-63a5400a"
AWS_AND_LUSTRE = {
    ("Endpoints", "tcp", 443, 443),
    (S3_PREFIX_LIST, "tcp", 443, 443),
    (VPC_CIDR, "tcp", 988, 988),
    (VPC_CIDR, "tcp", 1018, 1023),
}


def _build(*, internet_egress: bool, training_traffic: bool = False) -> Template:
    stack = bare_stack()
    network = vpc(stack)
    NodeSecurityGroup(
        stack,
        "Node",
        vpc=network,
        vpc_cidr=VPC_CIDR,
        s3_prefix_list_id=S3_PREFIX_LIST,
        endpoint_security_group=ec2.SecurityGroup(stack, "Endpoints", vpc=network),
        internet_egress=internet_egress,
        training_traffic=training_traffic,
    )
    return template(stack)


def _rules(tmpl: Template, direction: str) -> set[tuple]:
    return {
        (peer if not str(peer).startswith("Endpoints") else "Endpoints", *rest)
        for peer, *rest in sg_rules(tmpl, group_id(tmpl, "Node"), direction)
    }


def test_isolated_node_sends_only_https_to_aws_and_lustre_in_the_vpc() -> None:
    tmpl = _build(internet_egress=False)
    assert _rules(tmpl, "Ingress") == set()
    assert _rules(tmpl, "Egress") == AWS_AND_LUSTRE


def test_nat_node_adds_https_to_the_internet_only() -> None:
    tmpl = _build(internet_egress=True)
    # No HTTP: nodes install nothing at boot (the image builds have a group of their own).
    assert _rules(tmpl, "Egress") == AWS_AND_LUSTRE | {("0.0.0.0/0", "tcp", 443, 443)}


def test_training_traffic_is_tcp_on_unprivileged_ports_between_members_only() -> None:
    tmpl = _build(internet_egress=False, training_traffic=True)
    node = group_id(tmpl, "Node")
    between_members = (node, "tcp", *TRAINING_TCP_PORTS)
    assert _rules(tmpl, "Ingress") == {between_members}
    assert _rules(tmpl, "Egress") == AWS_AND_LUSTRE | {between_members}
    # A packet to the rendezvous port leaves one member (egress to the group) and enters another (ingress
    # from the group); one to a privileged port does not.
    low, high = TRAINING_TCP_PORTS
    assert low <= 29400 <= high and not low <= 22 <= high
