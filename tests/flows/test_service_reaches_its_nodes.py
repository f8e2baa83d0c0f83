"""A served fleet's request path, through every resource on its way, in each environment that serves.

client CIDR -> the load balancer's security group (ingress on the listener port) -> its egress to the node
security group (Network stack) on the service port -> the node group's ingress from the load balancer's group
on that port -> the listener's target group (port and health path = the service's) -> the fleet's group
(TargetGroupARNs), whose launch templates carry the node group; the group's request-count policy and the
service alarms (Monitoring) name that load balancer and target group; the access logs reach the access log
bucket (Security), SSE-S3, whose policy admits the Region's Elastic Load Balancing writer.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import aws_iam as iam

from config.naming import ResourceNames
from gpu_constructs.fleet.service_load_balancer import access_log_writer
from tests.flows.assembly import Environment, Ref
from tests.intrinsics import evaluate
from tests.policy_eval import Request, explain, service_may
from tests.synth import Synth

SERVED = ["dev"]  # the test environments whose config has a fleets[].service
#: What the load balancer answers itself is read for the load balancer as a whole (its only target group's).
LOAD_BALANCER_WIDE = {"HTTPCode_ELB_5XX_Count", "RequestCount"}


def _produced(env: Environment, stack: str, value: Any) -> tuple[str, Any]:
    """The value a reference stands for in its producing stack (an output of another stack followed)."""
    if isinstance(value, dict) and "Fn::GetStackOutput" in value:
        producer = value["Fn::GetStackOutput"]["StackName"]
        return producer, env.stacks[producer].json["Outputs"][value["Fn::GetStackOutput"]["OutputName"]]["Value"]
    return stack, value


def _rules(env: Environment, group: Ref, direction: str) -> list[tuple[Any, int, int, str]]:
    """(peer: a CIDR or the peer group's Ref, from port, to port, protocol) of every rule of ``group``."""
    found = []
    inline = env.resource(group)["Properties"].get(f"SecurityGroup{direction}", [])
    separate = [
        (ref.stack, r["Properties"])
        for ref, r in env.resources(f"AWS::EC2::SecurityGroup{direction}")
        if env.target(ref.stack, r["Properties"]["GroupId"]) == group
    ]
    for stack, rule in [(group.stack, r) for r in inline] + separate:
        if rule.get("FromPort") == 252:  # the no-traffic placeholder
            continue
        peer_key = "SourceSecurityGroupId" if direction == "Ingress" else "DestinationSecurityGroupId"
        peer = rule.get("CidrIp") or env.target(stack, rule.get(peer_key))
        found.append((peer, rule["FromPort"], rule["ToPort"], rule["IpProtocol"]))
    return found


@pytest.mark.parametrize("env", SERVED)
def test_a_client_reaches_the_service_port_of_the_fleets_nodes(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    names = ResourceNames.of(environment.config)
    served = [f for f in environment.config.fleets if f.service is not None]
    assert served, f"{env} serves nothing"
    for fleet in served:
        service = fleet.service
        assert service is not None
        (group_ref, group) = next(
            (ref, g)
            for ref, g in environment.resources("AWS::AutoScaling::AutoScalingGroup")
            if g["Properties"]["AutoScalingGroupName"] == names.asg_name(fleet.name)
        )
        (tg_ref,) = [environment.target(group_ref.stack, arn) for arn in group["Properties"]["TargetGroupARNs"]]
        assert tg_ref is not None
        target_group = environment.resource(tg_ref)["Properties"]
        assert (target_group["Port"], target_group["HealthCheckPath"]) == (service.port, service.health_check_path)
        assert group["Properties"]["HealthCheckType"] == "ELB"
        # The listener that forwards to this target group, and its load balancer.
        ((_, listener),) = [
            (ref, lst)
            for ref, lst in environment.resources("AWS::ElasticLoadBalancingV2::Listener")
            if environment.target(ref.stack, lst["Properties"]["DefaultActions"][0]["TargetGroupArn"]) == tg_ref
        ]
        lb_ref = environment.target(tg_ref.stack, listener["Properties"]["LoadBalancerArn"])
        assert lb_ref is not None
        port = listener["Properties"]["Port"]
        (lb_group,) = [
            environment.target(lb_ref.stack, g) for g in environment.resource(lb_ref)["Properties"]["SecurityGroups"]
        ]
        assert lb_group is not None
        # client -> load balancer group: exactly the configured clients, on the listener port.
        ingress = _rules(environment, lb_group, "Ingress")
        assert sorted(p for p, *_ in ingress) == sorted(service.load_balancer.allowed_cidrs), ingress
        assert {(lo, hi, proto) for _, lo, hi, proto in ingress} == {(port, port, "tcp")}
        # load balancer group -> the node group, only on the service port.
        ((node_group, lo, hi, proto),) = _rules(environment, lb_group, "Egress")
        assert isinstance(node_group, Ref) and node_group.stack == f"{env}-Network"
        assert (lo, hi, proto) == (service.port, service.port, "tcp")
        # the node group admits it: the load balancer's group on the service port.
        assert (lb_group, service.port, service.port, "tcp") in _rules(environment, node_group, "Ingress")
        # ... and the nodes of this group carry the node group.
        templates = [environment.resource(t) for t in _launch_templates(environment, group_ref, group)]
        groups = {
            environment.target(group_ref.stack, g)
            for t in templates
            for nic in t["Properties"]["LaunchTemplateData"].get("NetworkInterfaces", [])
            for g in nic["Groups"]
        } | {
            environment.target(group_ref.stack, g)
            for t in templates
            for g in t["Properties"]["LaunchTemplateData"].get("SecurityGroupIds", [])
        }
        assert templates and None not in groups
        assert node_group in groups
        _request_count_policy_names(environment, group_ref, lb_ref, tg_ref, listener, fleet.name)
        _alarms_name(environment, lb_ref, tg_ref, fleet.name)


def _launch_templates(environment: Environment, group_ref: Ref, group: dict[str, Any]) -> set[Ref]:
    """Every launch template the group launches from (its own, or its mixed-instances policy's and overrides')."""
    found: set[Ref] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key == "LaunchTemplateId" and (ref := environment.target(group_ref.stack, inner)) is not None:
                    found.add(ref)
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(group["Properties"])
    return found


def _request_count_policy_names(
    environment: Environment, group_ref: Ref, lb_ref: Ref, tg_ref: Ref, listener: dict[str, Any], fleet: str
) -> None:
    """The group's ALBRequestCountPerTarget policy's label evaluates to this load balancer / this target group."""
    (spec,) = [
        p["Properties"]["TargetTrackingConfiguration"]["PredefinedMetricSpecification"]
        for ref, p in environment.resources("AWS::AutoScaling::ScalingPolicy")
        if environment.target(ref.stack, p["Properties"]["AutoScalingGroupName"]) == group_ref
        and "PredefinedMetricSpecification" in p["Properties"].get("TargetTrackingConfiguration", {})
    ]
    assert spec["PredefinedMetricType"] == "ALBRequestCountPerTarget"
    lb_name, tg_name = f"app/{fleet}-lb/50dc6c495c0c9188", f"targetgroup/{fleet}-tg/943f017f100becff"
    listener_id = next(
        lid
        for lid, lst in environment.stacks[lb_ref.stack].resources("AWS::ElasticLoadBalancingV2::Listener").items()
        if lst is listener
    )
    values = {
        listener_id: f"arn:aws:elasticloadbalancing:{environment.region}:{environment.account}:listener/{lb_name}/1a",
        f"{tg_ref.logical_id}.TargetGroupFullName": tg_name,
        f"{lb_ref.logical_id}.LoadBalancerFullName": lb_name,
    }
    assert evaluate(spec["ResourceLabel"], values) == f"{lb_name}/{tg_name}"


def _alarms_name(environment: Environment, lb_ref: Ref, tg_ref: Ref, fleet: str) -> None:
    """Every ELB alarm of this fleet (Monitoring) is dimensioned by this load balancer and target group."""
    prefix = f"gpu-platform-{environment.name}-{fleet}-"
    seen = set()
    for ref, alarm in environment.resources("AWS::CloudWatch::Alarm"):
        props = alarm["Properties"]
        stats = (
            [props]
            if "MetricName" in props
            else [q["MetricStat"]["Metric"] for q in props.get("Metrics", []) if "MetricStat" in q]
        )
        for stat in stats:
            if stat.get("Namespace") != "AWS/ApplicationELB":
                continue
            assert props["AlarmName"].startswith(prefix), props["AlarmName"]
            dims = {d["Name"]: _produced(environment, ref.stack, d["Value"]) for d in stat["Dimensions"]}
            assert dims["LoadBalancer"] == (lb_ref.stack, {"Fn::GetAtt": [lb_ref.logical_id, "LoadBalancerFullName"]})
            if "TargetGroup" in dims or stat["MetricName"] not in LOAD_BALANCER_WIDE:
                assert dims["TargetGroup"] == (
                    tg_ref.stack,
                    {"Fn::GetAtt": [tg_ref.logical_id, "TargetGroupFullName"]},
                )
            seen.add(props["AlarmName"].removeprefix(prefix))
    assert seen == {"http-5xx-rate", "p99-latency", "unhealthy-hosts", "lb-5xx-rate", "no-healthy-hosts"}


@pytest.mark.parametrize("env", SERVED)
def test_access_logs_reach_the_sse_s3_access_log_bucket(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    followed = 0
    for ref, lb in environment.resources("AWS::ElasticLoadBalancingV2::LoadBalancer"):
        attributes = {a["Key"]: a["Value"] for a in lb["Properties"]["LoadBalancerAttributes"]}
        assert attributes["access_logs.s3.enabled"] == "true"
        bucket = environment.target(ref.stack, attributes["access_logs.s3.bucket"])
        assert bucket is not None and bucket.stack == f"{env}-Security"
        encryption = environment.resource(bucket)["Properties"]["BucketEncryption"]
        assert [
            r["ServerSideEncryptionByDefault"]["SSEAlgorithm"] for r in encryption["ServerSideEncryptionConfiguration"]
        ] == ["AES256"]
        policy = environment.policy_of("AWS::S3::BucketPolicy", "Bucket", bucket)
        bucket_arn = environment.resolver(bucket.stack)._arn(bucket.logical_id)
        prefix = attributes["access_logs.s3.prefix"]
        log = f"{bucket_arn}/{prefix}/AWSLogs/{environment.account}/elasticloadbalancing/{environment.region}/x.log.gz"
        writer = access_log_writer(environment.region)
        if isinstance(writer, iam.AccountPrincipal):
            principal = {"AWS": f"arn:aws:iam::{writer.account_id}:root"}
        else:
            assert isinstance(writer, iam.ServicePrincipal)
            principal = {"Service": writer.service}
        context = {"aws:SecureTransport": True, "s3:TlsVersion": 1.2}
        delivery = Request("s3:PutObject", log, principal, context)
        assert service_may(policy, delivery), explain([policy], delivery, resource_policy=True)
        for elsewhere in (f"{bucket_arn}/data-bucket/x", log.replace(environment.account, "999999999999")):
            assert not service_may(policy, Request("s3:PutObject", elsewhere, principal, context))
        followed += 1
    assert followed == len([f for f in environment.config.fleets if f.service is not None])
