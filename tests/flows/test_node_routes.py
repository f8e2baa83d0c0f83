"""Every AWS call a GPU node makes has a route out of its subnet, in every environment.

The calls come from the code itself: the boto3 clients and AWS CLI commands of scripts/node and
of the user data (gpu_constructs/fleet/render/user_data.py), plus the agents' declared calls
(gpu_constructs.network.vpc_endpoints.AGENT_CALLS: SSM agent, KMS-encrypted sessions, CloudWatch agent,
containers). A call reaches AWS from an isolated environment only through a private-DNS interface
endpoint in the GPU subnets whose security group admits HTTPS from the nodes, or through the S3
gateway endpoint on the GPU subnets' route tables; with NAT egress, through the NAT route. A node
script that starts calling a new service fails here until the service has a route.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

import pytest

from config import EgressMode
from config.naming import ResourceNames
from gpu_constructs.network.vpc_endpoints import AGENT_CALLS, CLIENT_ENDPOINTS, GATEWAY_SERVICES
from tests.iam_documents import Resolver
from tests.policy_eval import Request, explain, role_may
from tests.role_policies import role
from tests.stacks.network import gpu_subnets as _gpu_subnets
from tests.stacks.network import ref as _ref
from tests.stacks.network import route_tables_of as _route_tables_of
from tests.synth import StackTemplate, Synth

ROOT = Path(__file__).resolve().parents[2]
NODE_SCRIPTS = ROOT / "scripts" / "node"
USER_DATA = ROOT / "gpu_constructs" / "fleet" / "render" / "user_data.py"
ENVS = ["dev", "staging", "prod"]

_BOTO3_CLIENT = re.compile(r"""\.client\(\s*["']([a-z0-9.-]+)["']""")
# `aws s3 ...`, or the CLI through a variable as the user data calls it (`"$aws" s3 ...`).
_AWS_CLI = re.compile(r"""(?:^|[\s;|&("'`])(?:aws|"\$aws"|\$aws|"\$\{aws\}")\s+([a-z0-9-]+)\s""", re.MULTILINE)


def _code_lines(path: Path) -> str:
    """The file without comment lines (a comment that mentions `aws s3 cp` is not a call)."""
    return "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))


def node_calls() -> dict[str, set[str]]:
    """Endpoint service name -> the callers (file, or agent) that call it."""
    calls: dict[str, set[str]] = {}
    files = sorted(NODE_SCRIPTS.rglob("*.py")) + sorted(NODE_SCRIPTS.rglob("*.sh")) + [USER_DATA]
    files = [path for path in files if "__pycache__" not in path.parts]
    for path in files:
        text = _code_lines(path)
        names = set(_BOTO3_CLIENT.findall(text)) | set(_AWS_CLI.findall(text))
        for name in names:
            assert name in CLIENT_ENDPOINTS, (
                f"{path.relative_to(ROOT)} calls {name!r}: map it to its endpoint in "
                "gpu_constructs/network/vpc_endpoints.py CLIENT_ENDPOINTS and give it a route"
            )
            calls.setdefault(CLIENT_ENDPOINTS[name], set()).add(str(path.relative_to(ROOT)))
    for caller, services in AGENT_CALLS.items():
        for service in services:
            calls.setdefault(service, set()).add(caller)
    return calls


def test_the_scan_finds_the_node_scripts_calls() -> None:
    calls = node_calls()
    assert "scripts/node/gpu_health.py" in calls["monitoring"]
    assert "scripts/node/gpu_health.py" in calls["autoscaling"]
    assert "scripts/node/lifecycle.py" in calls["autoscaling"]
    assert "gpu_constructs/fleet/render/user_data.py" in calls["s3"]
    # The user data abandons a failed launch itself (complete-lifecycle-action).
    assert "gpu_constructs/fleet/render/user_data.py" in calls["autoscaling"]
    assert {"ssm", "ssmmessages", "ec2messages", "kms", "logs", "monitoring", "ec2"} <= set(calls)


def _service(endpoint: dict, region: str) -> str:
    name = endpoint["ServiceName"]
    if isinstance(name, dict):  # the gateway's Fn::Join of com.amazonaws.<region>.<service>
        name = "".join(p if isinstance(p, str) else region for p in name["Fn::Join"][1])
    prefix = f"com.amazonaws.{region}."
    assert name.startswith(prefix), name
    return name.removeprefix(prefix)


def _admits_https_from(stack: StackTemplate, group_id: str, cidr: str) -> bool:
    rules = stack.json["Resources"][group_id]["Properties"].get("SecurityGroupIngress", [])
    rules += [
        r["Properties"]
        for r in stack.resources("AWS::EC2::SecurityGroupIngress").values()
        if _ref(r["Properties"]["GroupId"]) == group_id
    ]
    vpc = ipaddress.ip_network(cidr)
    return any(
        r["IpProtocol"] in ("tcp", "-1")
        and (r["IpProtocol"] == "-1" or r["FromPort"] <= 443 <= r["ToPort"])
        and "CidrIp" in r
        and vpc.subnet_of(ipaddress.ip_network(r["CidrIp"]))
        for r in rules
    )


def routes(synth: Synth, env: str) -> dict[str, str]:
    """Endpoint service name -> how a node in a GPU subnet of ``env`` reaches it."""
    cfg = synth.environments[env]
    stack = synth.stack(env, "Network")
    gpu_subnets = set(_gpu_subnets(stack))
    gpu_tables = _route_tables_of(stack, gpu_subnets)
    found: dict[str, str] = {}
    for endpoint in (e["Properties"] for e in stack.resources("AWS::EC2::VPCEndpoint").values()):
        service = _service(endpoint, cfg.region)
        if endpoint.get("VpcEndpointType") == "Gateway":
            if {_ref(t) for t in endpoint["RouteTableIds"]} >= gpu_tables:
                found[service] = "gateway endpoint on every GPU route table"
        elif (
            endpoint.get("PrivateDnsEnabled") is True
            and {_ref(s) for s in endpoint["SubnetIds"]} == gpu_subnets
            and any(_admits_https_from(stack, _ref(g), cfg.network.vpc_cidr) for g in endpoint["SecurityGroupIds"])
        ):
            found[service] = "private-DNS interface endpoint in the GPU subnets, HTTPS admitted from the VPC"
    nat_tables = {
        _ref(r["Properties"]["RouteTableId"])
        for r in stack.resources("AWS::EC2::Route").values()
        if r["Properties"].get("DestinationCidrBlock") == "0.0.0.0/0" and "NatGatewayId" in r["Properties"]
    }
    if gpu_tables and gpu_tables <= nat_tables:
        found["*"] = "0.0.0.0/0 through NAT from every GPU route table"
    return found


@pytest.mark.parametrize("env", ENVS)
def test_every_node_call_has_a_route(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    reachable = routes(synth, env)
    missing = {
        service: sorted(callers)
        for service, callers in node_calls().items()
        if service not in reachable and "*" not in reachable
    }
    assert not missing, f"{env}: no route from the GPU subnets for {missing}"
    if cfg.network.egress is EgressMode.ISOLATED:
        assert "*" not in reachable  # isolated: the endpoints are the only way out
        for service in node_calls():
            kind = "gateway" if service in GATEWAY_SERVICES else "private-DNS interface"
            assert reachable[service].startswith(kind), (service, reachable[service])
    else:
        assert "*" in reachable and "s3" in reachable  # NAT, and S3 stays off the NAT's bill


@pytest.mark.parametrize("env", ENVS)
def test_every_interface_endpoint_has_a_caller(synth: Synth, env: str) -> None:
    """An endpoint costs per hour and zone: each one is there because something on a node calls it."""
    cfg = synth.environments[env]
    stack = synth.stack(env, "Network")
    services = {_service(e["Properties"], cfg.region) for e in stack.resources("AWS::EC2::VPCEndpoint").values()}
    assert services - set(node_calls()) == set()


def _node_group(stack: StackTemplate) -> str:
    (group_id,) = [k for k in stack.resources("AWS::EC2::SecurityGroup") if k.startswith("NodesSecurityGroup")]
    return group_id


def _node_egress(stack: StackTemplate) -> list[dict]:
    group_id = _node_group(stack)
    inline = stack.json["Resources"][group_id]["Properties"].get("SecurityGroupEgress", [])
    separate = [
        r["Properties"]
        for r in stack.resources("AWS::EC2::SecurityGroupEgress").values()
        if _ref(r["Properties"]["GroupId"]) == group_id
    ]
    return inline + separate


def _https(rule: dict) -> bool:
    return rule["IpProtocol"] == "tcp" and rule["FromPort"] <= 443 <= rule["ToPort"]


def _s3_prefix_list_lookup(stack: StackTemplate, region: str) -> str:
    """The custom resource whose Create call is DescribePrefixLists of the region's S3 prefix list."""
    (found,) = [
        k
        for k, r in stack.resources("Custom::AWS").items()
        if '"action":"DescribePrefixLists"' in r["Properties"]["Create"]
        and f"com.amazonaws.{region}.s3" in r["Properties"]["Create"]
    ]
    return found


@pytest.mark.parametrize("env", ENVS)
def test_every_node_call_leaves_the_node_security_group(synth: Synth, env: str) -> None:
    """The node group sends a call only where its route goes: the endpoints' group, the S3 prefix
    list, NAT where the environment has it; Lustre inside the VPC; nothing else."""
    cfg = synth.environments[env]
    stack = synth.stack(env, "Network")
    egress = _node_egress(stack)
    assert not [r for r in egress if r["IpProtocol"] == "-1"], "no all-protocol egress from GPU nodes"
    to_prefix_list = {
        _ref(r["DestinationPrefixListId"]) for r in egress if _https(r) and "DestinationPrefixListId" in r
    }
    to_groups = {
        _ref(r["DestinationSecurityGroupId"]) for r in egress if _https(r) and "DestinationSecurityGroupId" in r
    }
    to_anywhere = [r for r in egress if _https(r) and r.get("CidrIp") == "0.0.0.0/0"]
    interface_groups = {
        _service(e["Properties"], cfg.region): {_ref(g) for g in e["Properties"].get("SecurityGroupIds", [])}
        for e in stack.resources("AWS::EC2::VPCEndpoint").values()
    }
    isolated = cfg.network.egress is EgressMode.ISOLATED
    assert bool(to_anywhere) is not isolated  # 443 to the internet only through NAT
    for service in node_calls():
        if service in GATEWAY_SERVICES:
            assert _s3_prefix_list_lookup(stack, cfg.region) in to_prefix_list, service
        elif isolated:
            assert interface_groups[service] & to_groups, f"{env}: no egress to the {service} endpoint's group"
        else:
            assert to_anywhere, service
    lustre = {
        (r["FromPort"], r["ToPort"])
        for r in egress
        if r["IpProtocol"] == "tcp" and r.get("CidrIp") == cfg.network.vpc_cidr
    }
    assert lustre == {(988, 988), (1018, 1023)}
    other = [
        r
        for r in egress
        if not _https(r) and r.get("CidrIp") != cfg.network.vpc_cidr and not (r.get("FromPort") == 80 and not isolated)
    ]
    # Nothing between nodes in the group every fleet shares: training jobs' TCP has the training group.
    assert other == []


def _node_requests(synth: Synth, env: str) -> dict[str, list[Request]]:
    """Endpoint service name -> a representative call of each caller of it, as the node role makes it."""
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    acct, region = cfg.account, cfg.region
    group = names.asg_name(cfg.fleets[0].name)
    key = f"arn:aws:kms:{region}:{acct}:key/{SAMPLE_KEY}"
    own = {"aws:ResourceAccount": acct}
    log_stream = f"arn:aws:logs:{region}:{acct}:log-group:{names.node_log_group('bootstrap')}:log-stream:i-0"
    # the job runner's output (scripts/node/jobs/runner.py)
    job_stream = (
        f"arn:aws:logs:{region}:{acct}:log-group:{names.job_log_group}:log-stream:{names.job_log_stream('j', 'i-0')}"
    )
    return {
        "ssm": [
            Request("ssm:UpdateInstanceInformation", f"arn:aws:ec2:{region}:{acct}:instance/i-0"),
            Request("ssm:GetParameter", f"arn:aws:ssm:{region}:{acct}:parameter{names.ssm_parameter_prefix}fsx/id"),
        ],
        "ssmmessages": [Request("ssmmessages:CreateControlChannel", "*", context={"aws:RequestedRegion": region})],
        "ec2messages": [Request("ec2messages:GetMessages", "*", context={"aws:RequestedRegion": region})],
        # the session's data key (the logs key, which the session document names)
        "kms": [Request("kms:GenerateDataKey", key), Request("kms:Decrypt", key)],
        "logs": [
            Request(action, stream)
            for stream in (log_stream, job_stream)
            for action in ("logs:PutLogEvents", "logs:CreateLogStream")
        ],
        "monitoring": [
            Request("cloudwatch:PutMetricData", "*", context={"cloudwatch:namespace": names.metrics_namespace})
        ],
        "ec2": [Request("ec2:DescribeTags", "*")],
        "autoscaling": [
            Request(
                "autoscaling:CompleteLifecycleAction",
                f"arn:aws:autoscaling:{region}:{acct}:autoScalingGroup:{SAMPLE_KEY}:autoScalingGroupName/{group}",
            )
        ],
        "s3": [
            Request("s3:GetObject", f"arn:aws:s3:::{names.data_bucket}/datasets/a", context=own),
            Request("s3:PutObject", f"arn:aws:s3:::{names.data_bucket}/checkpoints/a", context=own),
            # what the user data downloads (its `fetch s3://...`): the node scripts and the examples
            *(Request("s3:GetObject", f"arn:aws:s3:::{src}", context=own) for src in _script_sources(synth, env)),
        ],
        "ecr.api": [Request("ecr:GetAuthorizationToken", "*")],
        "ecr.dkr": [
            Request(action, f"arn:aws:ecr:{region}:{acct}:repository/team/model")
            for action in ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability")
        ],
        "sts": [],  # GetCallerIdentity: no IAM permission is needed (see NO_PERMISSION)
    }


SAMPLE_KEY = "0123abcd-0000-4000-8000-000000000000"


def _script_sources(synth: Synth, env: str) -> set[str]:
    """bucket/key of the node scripts every launch template's user data downloads."""
    found = set(re.findall(r"fetch s3://([^\s\"\\]+)", json.dumps(synth.stack(env, "Fleets").json)))
    assert found, f"{env}: no node scripts download in the user data"
    return found


#: Calls AWS authorizes without any IAM permission.
NO_PERMISSION = {"sts": "sts:GetCallerIdentity"}


@pytest.mark.parametrize("env", ENVS)
def test_every_node_call_is_allowed_by_the_node_role_and_its_boundary(synth: Synth, env: str) -> None:
    """A route alone does not make a call work: each service a node calls is followed to the node
    role's policies AND the permissions boundary, with a representative call per caller."""
    cfg = synth.environments[env]
    node = role(synth, env, "Security", "GpuNodeRole")
    security = synth.stack(env, "Security")
    (logs_key,) = [k for k in security.resources("AWS::KMS::Key") if k.startswith("KeysLogs")]
    key_arn = Resolver(security.json, account=cfg.account, region=cfg.region).resolve({"Fn::GetAtt": [logs_key, "Arn"]})
    requests = _node_requests(synth, env)
    assert set(node_calls()) <= set(requests), f"add a representative call for {set(node_calls()) - set(requests)}"
    reachable = routes(synth, env)
    for service, calls in requests.items():
        assert service in reachable or "*" in reachable, f"{env}: {service} has no route"
        assert calls or service in NO_PERMISSION, service
        for call in calls:
            resource = call.resource.replace(f"key/{SAMPLE_KEY}", key_arn.split(":", 5)[5])
            request = Request(call.action, resource, context={**node.as_caller, **call.context})
            assert role_may(node.identity, node.boundary, request), (
                f"{env}: the node cannot {call.action} on {resource}: "
                + explain(node.identity, request)
                + " / boundary: "
                + explain([node.boundary], request)
            )
    # The sts entry claims no role chaining: the node may not assume roles.
    assume = Request("sts:AssumeRole", f"arn:aws:iam::{cfg.account}:role/anything", context=node.as_caller)
    assert not role_may(node.identity, node.boundary, assume)
    # Pulls stay in this account and region, read only.
    for refused in (
        Request("ecr:BatchGetImage", f"arn:aws:ecr:{cfg.region}:999999999999:repository/team/model"),
        Request("ecr:PutImage", f"arn:aws:ecr:{cfg.region}:{cfg.account}:repository/team/model"),
    ):
        assert not role_may(node.identity, node.boundary, refused), refused
