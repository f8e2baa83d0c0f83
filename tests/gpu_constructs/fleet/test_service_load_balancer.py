"""ServiceLoadBalancer: clients -> the load balancer's group -> the node group on the service port -> a target
group that checks the service's health path, attached to the fleet's group (ELB health checks); HTTPS with a
modern TLS policy when a certificate is configured; access logs admitted by the log bucket's policy; scaling on
requests per target of that target group."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from config.catalog import get_instance_type
from config.fleets.service import LoadBalancerSettings as LbConfig
from config.fleets.service import Service
from gpu_constructs.fleet.gpu_fleet import GpuFleet
from gpu_constructs.fleet.service_load_balancer import (
    HEALTH_CHECK_INTERVAL,
    HEALTHY_THRESHOLD,
    LOG_DELIVERY_PRINCIPAL,
    TARGET_GRACE_PERIOD,
    ServiceLoadBalancer,
    access_log_writer,
)
from gpu_constructs.network.platform_vpc import GPU_SUBNET_GROUP, PUBLIC_SUBNET_GROUP
from tests.gpu_constructs.helpers import (
    ACCOUNT,
    REGION,
    ZONES,
    bare_stack,
    document,
    fleet,
    group_id,
    key,
    only,
    resolved,
    sg_rules,
    template,
)
from tests.intrinsics import evaluate
from tests.policy_eval import Request, explain, service_may

CLIENT_CIDR = "10.20.0.0/16"
CLIENT_GROUP = "sg-0123456789abcdef0"
CERTIFICATE = f"arn:aws:acm:{REGION}:{ACCOUNT}:certificate/12345678-1234-1234-1234-123456789012"
#: Elastic Load Balancing's account in us-east-1 (ALB user guide, enable access logs).
ELB_ACCOUNT_US_EAST_1 = "127311923021"
ELB_ARN = f"arn:aws:elasticloadbalancing:{REGION}:{ACCOUNT}"


def _vpc(stack: Any) -> ec2.Vpc:
    return ec2.Vpc(
        stack,
        "Vpc",
        ip_addresses=ec2.IpAddresses.cidr("10.30.0.0/16"),
        availability_zones=list(ZONES),
        nat_gateways=1,
        subnet_configuration=[
            ec2.SubnetConfiguration(name=GPU_SUBNET_GROUP, subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            ec2.SubnetConfiguration(name=PUBLIC_SUBNET_GROUP, subnet_type=ec2.SubnetType.PUBLIC),
        ],
        restrict_default_security_group=False,
    )


def _build(service: Service) -> Template:
    config = fleet(service=service, capacity={"min": 1, "max": 4})
    stack = bare_stack()
    network = _vpc(stack)
    nodes = ec2.SecurityGroup(stack, "NodeSg", vpc=network, allow_all_outbound=False)
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    gpu_fleet = GpuFleet(
        stack,
        "Fleet",
        fleet=config,
        group_name="gpu-platform-dev-infer",
        instance_types=[get_instance_type(t) for t in config.instance_types],
        vpc=network,
        subnets=ec2.SubnetSelection(subnet_group_name=GPU_SUBNET_GROUP),
        machine_image=ec2.MachineImage.generic_linux({REGION: "ami-0123456789abcdef0"}),
        user_data=ec2.UserData.for_linux(),
        instance_profile=iam.InstanceProfile(stack, "Profile", role=role),
        node_security_group=nodes,
        efa_security_group=ec2.SecurityGroup(stack, "EfaSg", vpc=network),
        volume_key=key(stack),
        notification_topic=sns.Topic(stack, "Alerts"),
        metrics_namespace="GpuPlatform/dev",
    )
    ServiceLoadBalancer(
        stack,
        "Service",
        fleet_name="infer",
        service=service,
        vpc=network,
        auto_scaling_group=gpu_fleet.auto_scaling_group,
        node_security_group=nodes,
        access_log_bucket=s3.Bucket(stack, "AccessLogs", encryption=s3.BucketEncryption.S3_MANAGED),
        access_log_prefix="load-balancers/infer",
    )
    return template(stack)


def _service(**lb: Any) -> Service:
    settings = {"allowed_cidrs": [CLIENT_CIDR], "allowed_security_groups": [CLIENT_GROUP], **lb}
    return Service(port=9000, health_check_path="/ready", command="serve", load_balancer=LbConfig(**settings))


@pytest.fixture(scope="module")
def http() -> Template:
    return _build(_service(requests_per_target=600, deregistration_delay_seconds=45))


@pytest.fixture(scope="module")
def https() -> Template:
    return _build(_service(internal=False, certificate_arn=CERTIFICATE))


def _lb_group(tmpl: Template) -> str:
    return group_id(tmpl, "ServiceSecurityGroup")


def _lb(tmpl: Template) -> tuple[str, dict[str, Any]]:
    return only(tmpl, "AWS::ElasticLoadBalancingV2::LoadBalancer")


def test_clients_reach_the_service_port_of_the_nodes_through_the_load_balancer_only(http: Template) -> None:
    lb_group = _lb_group(http)
    assert sg_rules(http, lb_group, "Ingress") == {(CLIENT_CIDR, "tcp", 80, 80), (CLIENT_GROUP, "tcp", 80, 80)}
    assert sg_rules(http, lb_group, "Egress") == {(group_id(http, "NodeSg"), "tcp", 9000, 9000)}
    assert sg_rules(http, group_id(http, "NodeSg"), "Ingress") == {(lb_group, "tcp", 9000, 9000)}
    lb_id, lb = _lb(http)
    assert lb["Properties"]["Scheme"] == "internal"
    assert lb["Properties"]["SecurityGroups"] == [{"Fn::GetAtt": [lb_group, "GroupId"]}]
    private = {lid for lid in http.find_resources("AWS::EC2::Subnet") if "gpuSubnet" in lid}
    assert {s["Ref"] for s in lb["Properties"]["Subnets"]} == private and len(private) == 2
    # The listener forwards to the target group, which checks the service's own port and path.
    (listener,) = http.find_resources("AWS::ElasticLoadBalancingV2::Listener").values()
    assert (listener["Properties"]["Port"], listener["Properties"]["Protocol"]) == (80, "HTTP")
    assert listener["Properties"]["LoadBalancerArn"] == {"Ref": lb_id}
    tg_id, tg = only(http, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert listener["Properties"]["DefaultActions"] == [{"TargetGroupArn": {"Ref": tg_id}, "Type": "forward"}]
    props = tg["Properties"]
    assert (props["Port"], props["Protocol"], props["TargetType"]) == (9000, "HTTP", "instance")
    assert (props["HealthCheckPath"], props["HealthCheckPort"], props["Matcher"]) == (
        "/ready", "traffic-port", {"HttpCode": "200"},
    )  # fmt: skip
    assert {"Key": "deregistration_delay.timeout_seconds", "Value": "45"} in props["TargetGroupAttributes"]
    # ... and the fleet's group registers its nodes there and replaces those the load balancer finds unhealthy.
    group_resource = only(http, "AWS::AutoScaling::AutoScalingGroup")[1]
    group = group_resource["Properties"]
    assert group["TargetGroupARNs"] == [{"Ref": tg_id}]
    listener_id = next(iter(http.find_resources("AWS::ElasticLoadBalancingV2::Listener")))
    assert listener_id in group_resource["DependsOn"]  # registered once the target group has its listener
    assert group["HealthCheckType"] == "ELB"  # EC2 status checks always count as well
    assert group["HealthCheckGracePeriod"] == TARGET_GRACE_PERIOD.to_seconds()
    assert TARGET_GRACE_PERIOD.to_seconds() > HEALTHY_THRESHOLD * HEALTH_CHECK_INTERVAL.to_seconds()


def test_request_count_policy_tracks_this_load_balancer_and_target_group(http: Template) -> None:
    (policy,) = [
        p["Properties"]
        for p in http.find_resources("AWS::AutoScaling::ScalingPolicy").values()
        if "PredefinedMetricSpecification" in p["Properties"].get("TargetTrackingConfiguration", {})
    ]
    config = policy["TargetTrackingConfiguration"]
    assert config["TargetValue"] == 600
    spec = config["PredefinedMetricSpecification"]
    assert spec["PredefinedMetricType"] == "ALBRequestCountPerTarget"
    lb_id, _ = _lb(http)
    tg_id, _ = only(http, "AWS::ElasticLoadBalancingV2::TargetGroup")
    # Evaluated as CloudFormation would, with the ARNs ELB gives the listener and the target group.
    listener_id = next(iter(http.find_resources("AWS::ElasticLoadBalancingV2::Listener")))
    values = {
        listener_id: f"{ELB_ARN}:listener/app/infer-lb/50dc6c495c0c9188/f2f7dc8efc522ab2",
        f"{tg_id}.TargetGroupFullName": "targetgroup/infer-tg/943f017f100becff",
        f"{lb_id}.LoadBalancerFullName": "app/infer-lb/50dc6c495c0c9188",
    }
    assert (
        evaluate(spec["ResourceLabel"], values) == "app/infer-lb/50dc6c495c0c9188/targetgroup/infer-tg/943f017f100becff"
    )


def test_no_request_count_policy_without_a_target(https: Template) -> None:
    policies = https.find_resources("AWS::AutoScaling::ScalingPolicy").values()
    assert not [p for p in policies if "TargetTrackingConfiguration" in p["Properties"]]


def test_access_logs_go_to_the_log_bucket_whose_policy_admits_elb(http: Template) -> None:
    _, lb = _lb(http)
    attributes = {a["Key"]: a["Value"] for a in lb["Properties"]["LoadBalancerAttributes"]}
    bucket_id, _ = only(http, "AWS::S3::Bucket")
    assert attributes["access_logs.s3.enabled"] == "true"
    assert attributes["access_logs.s3.bucket"] == {"Ref": bucket_id}
    assert attributes["access_logs.s3.prefix"] == "load-balancers/infer"
    assert attributes["routing.http.drop_invalid_header_fields.enabled"] == "true"
    policy_id, _ = only(http, "AWS::S3::BucketPolicy")
    assert policy_id in lb["DependsOn"]
    policy = document(http, policy_id)
    bucket_arn = resolved(http, {"Fn::GetAtt": [bucket_id, "Arn"]})
    key_ = f"{bucket_arn}/load-balancers/infer/AWSLogs/{ACCOUNT}/elasticloadbalancing/{REGION}/2026/01/01/x.log.gz"
    elb = {"AWS": f"arn:aws:iam::{ELB_ACCOUNT_US_EAST_1}:root"}
    delivery = Request("s3:PutObject", key_, elb, {"aws:SecureTransport": True})
    assert service_may(policy, delivery), explain([policy], delivery, resource_policy=True)
    elsewhere = Request("s3:PutObject", f"{bucket_arn}/data-bucket/x", elb, {"aws:SecureTransport": True})
    assert not service_may(policy, elsewhere)
    other_account = key_.replace(f"AWSLogs/{ACCOUNT}", "AWSLogs/999999999999")
    assert not service_may(policy, Request("s3:PutObject", other_account, elb, {"aws:SecureTransport": True}))


def test_regions_without_an_elb_account_use_the_log_delivery_principal() -> None:
    assert isinstance(access_log_writer("us-east-1"), iam.AccountPrincipal)
    newer = access_log_writer("mx-central-1")
    assert isinstance(newer, iam.ServicePrincipal) and newer.service == LOG_DELIVERY_PRINCIPAL


def test_https_listener_with_a_modern_tls_policy_and_no_plain_http(https: Template) -> None:
    (listener,) = https.find_resources("AWS::ElasticLoadBalancingV2::Listener").values()
    props = listener["Properties"]
    assert (props["Port"], props["Protocol"]) == (443, "HTTPS")
    assert props["Certificates"] == [{"CertificateArn": CERTIFICATE}]
    assert props["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"
    assert sg_rules(https, _lb_group(https), "Ingress") == {
        (CLIENT_CIDR, "tcp", 443, 443),
        (CLIENT_GROUP, "tcp", 443, 443),
    }
    _, lb = _lb(https)
    assert lb["Properties"]["Scheme"] == "internet-facing"
    public = {lid for lid in https.find_resources("AWS::EC2::Subnet") if "publicSubnet" in lid}
    assert {s["Ref"] for s in lb["Properties"]["Subnets"]} == public
