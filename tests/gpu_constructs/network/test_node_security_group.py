"""NodeSecurityGroup: no ingress of its own; outbound HTTPS to endpoints and S3, Lustre in the VPC, and the
internet only with NAT; nothing between its own members (every fleet shares it)."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from gpu_constructs.network.node_security_group import NodeSecurityGroup
from tests.gpu_constructs.helpers import VPC_CIDR, bare_stack, group_id, sg_rules, template, vpc

S3_PREFIX_LIST = "pl-63a5400a"
AWS_AND_LUSTRE = {
    ("Endpoints", "tcp", 443, 443),
    (S3_PREFIX_LIST, "tcp", 443, 443),
    (VPC_CIDR, "tcp", 988, 988),
    (VPC_CIDR, "tcp", 1018, 1023),
}


def _build(*, internet_egress: bool) -> Template:
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
