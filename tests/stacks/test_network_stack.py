"""Behaviour of the network a GPU node relies on: private subnets, endpoints, flow logs, EFA group."""

from __future__ import annotations

import ipaddress

import pytest

from config import EgressMode
from gpu_constructs.network.vpc_endpoints import INTERFACE_SERVICES
from tests.stacks.network import gpu_subnets as _gpu_subnets
from tests.stacks.network import ref as _ref
from tests.stacks.network import route_tables_of as _route_tables_of
from tests.synth import StackTemplate, Synth

ENVS = ["dev", "staging", "prod"]


def network(synth: Synth, env: str) -> StackTemplate:
    return synth.stack(env, "Network")


@pytest.mark.parametrize("env", ENVS)
def test_vpc_uses_configured_cidr_and_zones(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = network(synth, env)
    (vpc,) = stack.resources("AWS::EC2::VPC").values()
    assert vpc["Properties"]["CidrBlock"] == cfg.network.vpc_cidr
    gpu = _gpu_subnets(stack)
    assert sorted(s["Properties"]["AvailabilityZone"] for s in gpu.values()) == sorted(cfg.availability_zones)
    vpc_net = ipaddress.IPv4Network(cfg.network.vpc_cidr)
    for subnet in gpu.values():
        net = ipaddress.IPv4Network(subnet["Properties"]["CidrBlock"])
        assert net.subnet_of(vpc_net)
        assert net.prefixlen == cfg.network.gpu_subnet_mask


@pytest.mark.parametrize("env", ENVS)
def test_gpu_subnets_get_no_public_ip_and_no_internet_gateway_route(synth: Synth, env: str) -> None:
    stack = network(synth, env)
    gpu = _gpu_subnets(stack)
    assert gpu
    for subnet in gpu.values():
        assert subnet["Properties"].get("MapPublicIpOnLaunch", False) is False
    gpu_tables = _route_tables_of(stack, set(gpu))
    assert len(gpu_tables) == len(gpu)
    igws = set(stack.resources("AWS::EC2::InternetGateway"))
    for route in stack.resources("AWS::EC2::Route").values():
        if _ref(route["Properties"]["RouteTableId"]) in gpu_tables:
            assert (
                _ref(route["Properties"].get("GatewayId")) not in igws | {None}
                or "GatewayId" not in route["Properties"]
            )


@pytest.mark.parametrize("env", ENVS)
def test_public_subnets_and_gateways_exist_only_with_nat_egress(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = network(synth, env)
    subnets = stack.resources("AWS::EC2::Subnet")
    public = [
        s for s in subnets.values() if {"Key": "aws-cdk:subnet-type", "Value": "Public"} in s["Properties"]["Tags"]
    ]
    if cfg.network.egress is EgressMode.NAT:
        assert len(public) == len(cfg.availability_zones)
        assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in public)
        assert len(stack.resources("AWS::EC2::NatGateway")) == cfg.network.nat_gateways
        assert len(stack.resources("AWS::EC2::InternetGateway")) == 1
        # every GPU subnet's only default route goes to a NAT gateway
        nats = set(stack.resources("AWS::EC2::NatGateway"))
        gpu_tables = _route_tables_of(stack, set(_gpu_subnets(stack)))
        defaults = [
            r["Properties"]
            for r in stack.resources("AWS::EC2::Route").values()
            if _ref(r["Properties"]["RouteTableId"]) in gpu_tables
        ]
        assert len(defaults) == len(gpu_tables)
        assert all(d["DestinationCidrBlock"] == "0.0.0.0/0" and _ref(d["NatGatewayId"]) in nats for d in defaults)
    else:
        assert public == []
        assert set(subnets) == set(_gpu_subnets(stack))
        for kind in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::EIP", "AWS::EC2::Route"):
            assert stack.resources(kind) == {}, kind


def _endpoint_service(props: dict) -> str:
    # ServiceName is "com.amazonaws.<region>.<service>" (sometimes built with Fn::Join on the region)
    name = props["ServiceName"]
    if isinstance(name, dict):
        name = "".join(p if isinstance(p, str) else "<region>" for p in name["Fn::Join"][1])
    return name.rsplit(".", 1)[-1] if ".ecr." not in name else name.split(".", 3)[-1]


@pytest.mark.parametrize("env", ENVS)
def test_endpoints(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = network(synth, env)
    endpoints = [e["Properties"] for e in stack.resources("AWS::EC2::VPCEndpoint").values()]
    gateways = [e for e in endpoints if e.get("VpcEndpointType") == "Gateway"]
    interfaces = [e for e in endpoints if e.get("VpcEndpointType") == "Interface"]
    assert len(gateways) == 1 and _endpoint_service(gateways[0]) == "s3"
    # the S3 gateway is on every GPU route table
    gpu_tables = _route_tables_of(stack, set(_gpu_subnets(stack)))
    assert {_ref(t) for t in gateways[0]["RouteTableIds"]} == gpu_tables
    if cfg.network.egress is EgressMode.ISOLATED:
        assert sorted(_endpoint_service(e) for e in interfaces) == sorted(
            [
                "ssm",
                "ssmmessages",
                "ec2messages",
                "kms",
                "ecr.api",
                "ecr.dkr",
                "logs",
                "monitoring",
                "sts",
                "autoscaling",
                "ec2",
            ]
        )
        assert len(interfaces) == len(INTERFACE_SERVICES)
        assert all(e["PrivateDnsEnabled"] is True for e in interfaces)
        (sg_ids,) = {tuple(_ref(g) for g in e["SecurityGroupIds"]) for e in interfaces}
        (sg_id,) = sg_ids if isinstance(sg_ids, tuple) else (sg_ids,)
        sg = stack.json["Resources"][sg_id]["Properties"]
        assert sg["SecurityGroupIngress"] == [
            {
                "CidrIp": cfg.network.vpc_cidr,
                "Description": "HTTPS from the VPC to AWS APIs",
                "FromPort": 443,
                "IpProtocol": "tcp",
                "ToPort": 443,
            }
        ]
        # nothing goes out of the endpoint group (CDK's placeholder rule matches no traffic)
        assert [r["CidrIp"] for r in sg["SecurityGroupEgress"]] == ["255.255.255.255/32"]
    else:
        assert interfaces == []


@pytest.mark.parametrize("env", ENVS)
def test_flow_logs_all_traffic_to_encrypted_group_with_configured_retention(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = network(synth, env)
    (flow_log,) = stack.resources("AWS::EC2::FlowLog").values()
    props = flow_log["Properties"]
    assert props["TrafficType"] == "ALL"
    assert props["ResourceType"] == "VPC"
    assert props["LogDestinationType"] == "cloud-watch-logs"
    group_id = _ref(props["LogGroupName"])
    group = stack.json["Resources"][group_id]["Properties"]
    assert group["RetentionInDays"] == cfg.logging.retention_days
    # the Security stack's logs key, by cross-stack reference
    assert group["KmsKeyId"]["Fn::GetStackOutput"]["StackName"] == f"{env}-Security"
    assert "KeysLogs" in group["KmsKeyId"]["Fn::GetStackOutput"]["OutputName"]
    # the delivery role's only grant is a managed policy on that group
    role_id = _ref(props["DeliverLogsPermissionArn"])
    policies = [p["Properties"] for p in stack.resources("AWS::IAM::ManagedPolicy").values()]
    (policy,) = [p for p in policies if {"Ref": role_id} in p["Roles"]]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Resource"] == {"Fn::GetAtt": [group_id, "Arn"]}
    # no inline policy on it (the S3 prefix list lookup's provider has its own role and policy)
    inline = [p["Properties"] for p in stack.resources("AWS::IAM::Policy").values()]
    assert not [p for p in inline if {"Ref": role_id} in p["Roles"]]


@pytest.mark.parametrize("env", ENVS)
def test_efa_security_group_is_self_only(synth: Synth, env: str) -> None:
    stack = network(synth, env)
    groups = {
        k: v
        for k, v in stack.resources("AWS::EC2::SecurityGroup").items()
        if "EFA" in v["Properties"]["GroupDescription"]
    }
    (efa_id,) = groups
    efa = groups[efa_id]["Properties"]
    assert "SecurityGroupIngress" not in efa
    assert [r["CidrIp"] for r in efa["SecurityGroupEgress"]] == ["255.255.255.255/32"]  # nothing but members
    ingress = [
        r["Properties"]
        for r in stack.resources("AWS::EC2::SecurityGroupIngress").values()
        if _ref(r["Properties"]["GroupId"]) == efa_id
    ]
    egress = [
        r["Properties"]
        for r in stack.resources("AWS::EC2::SecurityGroupEgress").values()
        if _ref(r["Properties"]["GroupId"]) == efa_id
    ]
    assert [(r["IpProtocol"], _ref(r["SourceSecurityGroupId"])) for r in ingress] == [("-1", efa_id)]
    assert [(r["IpProtocol"], _ref(r["DestinationSecurityGroupId"])) for r in egress] == [("-1", efa_id)]
    assert not any("CidrIp" in r or "CidrIpv6" in r for r in ingress + egress)


@pytest.mark.parametrize("env", ENVS)
def test_default_security_group_is_restricted(synth: Synth, env: str) -> None:
    stack = network(synth, env)
    (restrict,) = stack.resources("Custom::VpcRestrictDefaultSG").values()
    assert restrict["Properties"]["DefaultSecurityGroupId"] == {
        "Fn::GetAtt": [next(iter(stack.resources("AWS::EC2::VPC"))), "DefaultSecurityGroup"]
    }


def test_no_security_group_admits_the_internet(synth: Synth) -> None:
    for stack in synth.stacks.values():
        for res in stack.json["Resources"].values():
            rules = []
            if res["Type"] == "AWS::EC2::SecurityGroup":
                rules = res["Properties"].get("SecurityGroupIngress", [])
            elif res["Type"] == "AWS::EC2::SecurityGroupIngress":
                rules = [res["Properties"]]
            for rule in rules:
                assert rule.get("CidrIp") != "0.0.0.0/0", stack.name
                assert rule.get("CidrIpv6") != "::/0", stack.name
