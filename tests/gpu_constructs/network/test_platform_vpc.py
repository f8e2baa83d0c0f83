"""PlatformVpc: private GPU subnets; a route to the internet only with NAT; all traffic flow-logged."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from gpu_constructs.network.platform_vpc import PlatformVpc
from tests.gpu_constructs.helpers import DESTROY, RETENTION, VPC_CIDR, ZONES, arn_of, bare_stack, key, only, template


def _build(nat_gateways: int) -> Template:
    stack = bare_stack()
    PlatformVpc(
        stack,
        "Net",
        cidr=VPC_CIDR,
        availability_zones=ZONES,
        nat_gateways=nat_gateways,
        gpu_subnet_mask=20,
        public_subnet_mask=24,
        flow_log_key=key(stack),
        log_retention=RETENTION,
        removal_policy=DESTROY,
    )
    return template(stack)


@pytest.fixture(scope="module")
def isolated() -> Template:
    return _build(0)


@pytest.fixture(scope="module")
def nat() -> Template:
    return _build(1)


def test_isolated_vpc_has_no_way_to_the_internet(isolated: Template) -> None:
    for kind in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::EIP"):
        isolated.resource_count_is(kind, 0)
    isolated.resource_count_is("AWS::EC2::Subnet", len(ZONES))
    assert not isolated.find_resources("AWS::EC2::Route", {"Properties": {"DestinationCidrBlock": "0.0.0.0/0"}})
    isolated.all_resources_properties("AWS::EC2::Subnet", {"MapPublicIpOnLaunch": False})


def test_nat_vpc_routes_gpu_subnets_through_nat_only(nat: Template) -> None:
    nat.resource_count_is("AWS::EC2::NatGateway", 1)
    routes = nat.find_resources("AWS::EC2::Route", {"Properties": {"DestinationCidrBlock": "0.0.0.0/0"}})
    to_igw = [r for r in routes.values() if "GatewayId" in r["Properties"]]
    to_nat = [r for r in routes.values() if "NatGatewayId" in r["Properties"]]
    # One default route per zone each: public subnets to the IGW, GPU subnets to NAT.
    assert len(to_igw) == len(ZONES) and len(to_nat) == len(ZONES)
    assert not nat.find_resources("AWS::EC2::Subnet", {"Properties": {"MapPublicIpOnLaunch": True}})


def test_flow_logs_of_all_traffic_go_to_the_encrypted_group_by_a_role_scoped_to_it(isolated: Template) -> None:
    group_id, group = only(isolated, "AWS::Logs::LogGroup")
    assert group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0].startswith("Key")
    isolated.has_resource_properties(
        "AWS::EC2::FlowLog",
        {"TrafficType": "ALL", "LogDestinationType": "cloud-watch-logs", "LogGroupName": {"Ref": group_id}},
    )
    _, policy = only(isolated, "AWS::IAM::ManagedPolicy")
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Resource"] == {"Fn::GetAtt": [group_id, "Arn"]}
    assert arn_of(isolated, group_id).endswith(":*")  # the group's ARN attribute covers its streams
    isolated.resource_count_is("AWS::IAM::Policy", 0)  # no inline grant beside the managed one
