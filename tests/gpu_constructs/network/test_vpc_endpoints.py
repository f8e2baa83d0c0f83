"""VPC endpoints: the S3 gateway on the GPU route tables (its prefix list looked up read-only), and one
private-DNS interface endpoint per service a node calls, reachable on 443 from the VPC only."""

from __future__ import annotations

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from gpu_constructs.network.vpc_endpoints import (
    AGENT_CALLS,
    CLIENT_ENDPOINTS,
    GATEWAY_SERVICES,
    INTERFACE_SERVICES,
    InterfaceEndpoints,
    S3GatewayEndpoint,
)
from tests.gpu_constructs.helpers import (
    DESTROY,
    REGION,
    RETENTION,
    VPC_CIDR,
    ZONES,
    bare_stack,
    group_id,
    key,
    only,
    resolved,
    sg_rules,
    template,
    vpc,
)


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    network = vpc(stack)
    gpu = ec2.SubnetSelection(subnet_group_name="gpu")
    S3GatewayEndpoint(
        stack, "S3", vpc=network, subnets=gpu, logs_key=key(stack), log_retention=RETENTION, log_removal_policy=DESTROY
    )
    InterfaceEndpoints(stack, "Interfaces", vpc=network, vpc_cidr=VPC_CIDR, subnets=gpu)
    return template(stack)


def _service(tmpl: Template, endpoint: dict) -> str:
    """``ecr.api`` of ``com.amazonaws.us-east-1.ecr.api``."""
    return resolved(tmpl, endpoint["Properties"]["ServiceName"]).removeprefix(f"com.amazonaws.{REGION}.")


def test_every_service_a_node_calls_has_an_endpoint(tmpl: Template) -> None:
    endpoints = tmpl.find_resources("AWS::EC2::VPCEndpoint")
    interface = {_service(tmpl, e) for e in endpoints.values() if e["Properties"]["VpcEndpointType"] == "Interface"}
    gateway = {_service(tmpl, e) for e in endpoints.values() if e["Properties"]["VpcEndpointType"] == "Gateway"}
    needed = {s for services in AGENT_CALLS.values() for s in services} | set(CLIENT_ENDPOINTS.values())
    assert gateway == set(GATEWAY_SERVICES)
    (s3,) = [e for e in endpoints.values() if e["Properties"]["VpcEndpointType"] == "Gateway"]
    assert len(s3["Properties"]["RouteTableIds"]) == len(ZONES)  # the GPU subnets' route tables
    assert needed - set(GATEWAY_SERVICES) <= interface
    assert len(interface) == len(INTERFACE_SERVICES)


def test_interface_endpoints_resolve_privately_and_admit_https_from_the_vpc_only(tmpl: Template) -> None:
    for endpoint in tmpl.find_resources("AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        if props["VpcEndpointType"] == "Interface":
            assert props["PrivateDnsEnabled"] is True
            assert props["SecurityGroupIds"] == [{"Fn::GetAtt": [group_id(tmpl, "Interfaces"), "GroupId"]}]
    endpoints_group = group_id(tmpl, "Interfaces")
    assert sg_rules(tmpl, endpoints_group, "Ingress") == {(VPC_CIDR, "tcp", 443, 443)}
    assert sg_rules(tmpl, endpoints_group, "Egress") == set()


def test_s3_prefix_list_is_found_with_a_read_only_call(tmpl: Template) -> None:
    _, lookup = only(tmpl, "Custom::AWS")
    create = lookup["Properties"]["Create"]
    text = create if isinstance(create, str) else "".join(p for p in create["Fn::Join"][1] if isinstance(p, str))
    assert '"action":"DescribePrefixLists"' in text and f"com.amazonaws.{REGION}.s3" in text
    policies = [
        s
        for p in tmpl.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert [s["Action"] for s in policies] == ["ec2:DescribePrefixLists"]


def test_an_isolated_vpc_with_slurm_fleets_reaches_pcs_through_its_endpoint() -> None:
    """The PCS agent on a Slurm node registers through PCS's API (pcs:RegisterComputeNodeGroupInstance)."""
    stack = bare_stack()
    gpu = ec2.SubnetSelection(subnet_group_name="gpu")
    InterfaceEndpoints(stack, "Interfaces", vpc=vpc(stack), vpc_cidr=VPC_CIDR, subnets=gpu, pcs=True)
    tmpl = template(stack)
    services = {_service(tmpl, e) for e in tmpl.find_resources("AWS::EC2::VPCEndpoint").values()}
    assert "pcs" in services
    assert len(services) == len(INTERFACE_SERVICES) + 1
