"""A training job's way through an environment, from the job document to the bytes on the wire and in the logs.

- ``gpu-platform job run`` sends the environment's job document (Fleets stack) to the nodes of a training
  fleet; its defaults are the environment's ``jobs:`` settings.
- The nodes of one training fleet reach each other over TCP: torchrun's c10d rendezvous on
  ``jobs.rendezvous_port`` and NCCL's bootstrap and socket connections on ports the kernel picks. A packet
  is followed from the sending node's security groups (egress) to the receiving node's (ingress), with the
  groups read from the fleet's launch templates: the training group (Network stack) on every training
  fleet, beside the EFA group on an EFA fleet's interfaces. Privileged ports stay closed.
- Nothing else reaches those ports: an inference node cannot open a training node's rendezvous store or
  kernel-picked ports, and no node (training, or another inference node) reaches a served fleet's service
  port; only the fleet's load balancer does. The shared node group has no rule between its own members.
- The job runner on a node writes the job's output to ``/gpu-platform/<env>/jobs``, stream
  ``<job>/<instance-id>``: allowed by the node role and its boundary, into a group encrypted with the logs
  key, whose policy lets CloudWatch Logs use it for that group.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from config.fleets import Fleet, FleetRole
from config.naming import ResourceNames
from gpu_constructs.network.training_security_group import TRAINING_TCP_PORTS
from tests.flows.assembly import Environment, Ref
from tests.policy_eval import Request, explain, key_policy_may, role_may
from tests.role_policies import role
from tests.synth import Synth

ENVS = ["dev", "staging", "prod"]
SERVED = ["dev"]  # the test environments whose config has a fleets[].service (a training fleet beside it)
#: A port NCCL's bootstrap or socket transport may listen on (Linux's default ip_local_port_range is
#: 32768-60999), and the port torchrun gives workers as MASTER_PORT by default.
EPHEMERAL_PORT, MASTER_PORT = 45123, 29500


def _fleets(environment: Environment, role: FleetRole) -> list[Fleet]:
    fleets = [f for f in environment.config.fleets if f.role is role]
    assert fleets, f"{environment.name} has no {role.value} fleet"
    return fleets


def _training_fleets(environment: Environment) -> list[Fleet]:
    return _fleets(environment, FleetRole.TRAINING)


def _node_layouts(environment: Environment, fleet: Fleet) -> list[set[Ref]]:
    """The security groups of a node of ``fleet``, per launch template (one per EFA layout)."""
    return [_primary_groups(environment, t) for t in _launch_templates(environment, fleet)]


def _launch_templates(environment: Environment, fleet: Fleet) -> list[Ref]:
    """The launch templates the fleet's Auto Scaling group launches from."""
    stack = f"{environment.name}-Fleets"
    group_name = ResourceNames.of(environment.config).asg_name(fleet.name)
    (group,) = [
        res["Properties"]
        for ref, res in environment.resources("AWS::AutoScaling::AutoScalingGroup")
        if res["Properties"].get("AutoScalingGroupName") == group_name
    ]
    specs = [group["LaunchTemplate"]] if "LaunchTemplate" in group else []
    mixed = group.get("MixedInstancesPolicy", {}).get("LaunchTemplate", {})
    specs += [mixed["LaunchTemplateSpecification"]] if mixed else []
    specs += [
        o["LaunchTemplateSpecification"] for o in mixed.get("Overrides", []) if "LaunchTemplateSpecification" in o
    ]
    found = {environment.target(stack, spec["LaunchTemplateId"]) for spec in specs}
    assert found and None not in found, (fleet.name, specs)
    return sorted(found, key=lambda r: r.logical_id)  # type: ignore[arg-type,return-value]


def _primary_groups(environment: Environment, template: Ref) -> set[Ref]:
    """The security groups of the interface that holds the node's private address (card 0, device 0)."""
    data = environment.resource(template)["Properties"]["LaunchTemplateData"]
    if "SecurityGroupIds" in data:
        references = data["SecurityGroupIds"]
    else:
        (primary,) = [
            nic
            for nic in data["NetworkInterfaces"]
            if nic.get("DeviceIndex", 0) == 0 and nic.get("NetworkCardIndex", 0) == 0
        ]
        references = primary["Groups"]
    groups = {environment.target(template.stack, r) for r in references}
    assert None not in groups, references
    return groups  # type: ignore[return-value]


def _rules(environment: Environment, group: Ref, direction: str) -> list[dict[str, Any]]:
    """Inline and separate ``direction`` rules of ``group`` (the no-traffic placeholder is harmless)."""
    rules = list(environment.resource(group)["Properties"].get(f"SecurityGroup{direction}", []))
    for ref, res in environment.resources(f"AWS::EC2::SecurityGroup{direction}"):
        if environment.target(ref.stack, res["Properties"]["GroupId"]) == group:
            rules.append({**res["Properties"], "_stack": ref.stack})
    return [{**r, "_stack": r.get("_stack", group.stack)} for r in rules]


def _admits(environment: Environment, rule: dict[str, Any], port: int, peer_groups: set[Ref]) -> bool:
    """Whether ``rule`` lets TCP to ``port`` pass to/from a node carrying ``peer_groups``."""
    protocol = str(rule["IpProtocol"])
    if protocol not in ("tcp", "6", "-1"):
        return False
    if protocol != "-1" and not rule["FromPort"] <= port <= rule["ToPort"]:
        return False
    for field in ("SourceSecurityGroupId", "DestinationSecurityGroupId"):
        if field in rule:
            return environment.target(rule["_stack"], rule[field]) in peer_groups
    if "CidrIp" in rule:  # the peer node's address lies somewhere in the VPC
        vpc = ipaddress.ip_network(environment.config.network.vpc_cidr)
        return vpc.subnet_of(ipaddress.ip_network(rule["CidrIp"]))  # type: ignore[arg-type]
    return False


def tcp_passes(environment: Environment, sender: set[Ref], receiver: set[Ref], port: int) -> bool:
    """A TCP connection from a node with the ``sender`` groups to one with the ``receiver`` groups: some
    sender group lets it out to the receiver, and some receiver group lets it in from the sender."""
    out = any(_admits(environment, r, port, receiver) for g in sender for r in _rules(environment, g, "Egress"))
    into = any(_admits(environment, r, port, sender) for g in receiver for r in _rules(environment, g, "Ingress"))
    return out and into


@pytest.mark.parametrize("env", ENVS)
def test_the_nodes_of_a_training_fleet_reach_each_other_for_rendezvous_and_nccl(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    rendezvous = environment.config.jobs.rendezvous_port
    for fleet in _training_fleets(environment):
        layouts = _node_layouts(environment, fleet)
        for sender in layouts:  # a job may span the fleet's layouts (mixed instance types)
            for receiver in layouts:
                for port in (rendezvous, MASTER_PORT, EPHEMERAL_PORT, TRAINING_TCP_PORTS[1]):
                    assert tcp_passes(environment, sender, receiver, port), (env, fleet.name, port)
                for closed in (22, 80, 443):  # privileged ports: no SSH, nothing served between nodes
                    if not fleet.efa:  # an EFA group admits every protocol between its members (EFA needs it)
                        assert not tcp_passes(environment, sender, receiver, closed), (env, fleet.name, closed)


@pytest.mark.parametrize("env", ENVS)
def test_an_inference_node_cannot_reach_a_training_nodes_job_ports(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    rendezvous = environment.config.jobs.rendezvous_port
    for trainer in _training_fleets(environment):
        for server in _fleets(environment, FleetRole.INFERENCE):
            for inference in _node_layouts(environment, server):
                for training in _node_layouts(environment, trainer):
                    for port in (rendezvous, MASTER_PORT, EPHEMERAL_PORT):
                        assert not tcp_passes(environment, inference, training, port), (env, server.name, port)
                        assert not tcp_passes(environment, training, inference, port), (env, trainer.name, port)


def _load_balancer_groups(environment: Environment, fleet: Fleet) -> set[Ref]:
    """The security groups of the load balancer whose listener forwards to ``fleet``'s target group."""
    group_name = ResourceNames.of(environment.config).asg_name(fleet.name)
    ((group_ref, group),) = [
        (ref, res)
        for ref, res in environment.resources("AWS::AutoScaling::AutoScalingGroup")
        if res["Properties"].get("AutoScalingGroupName") == group_name
    ]
    targets = {environment.target(group_ref.stack, arn) for arn in group["Properties"]["TargetGroupARNs"]}
    (balancer,) = {
        environment.target(ref.stack, listener["Properties"]["LoadBalancerArn"])
        for ref, listener in environment.resources("AWS::ElasticLoadBalancingV2::Listener")
        if environment.target(ref.stack, listener["Properties"]["DefaultActions"][0]["TargetGroupArn"]) in targets
    }
    assert balancer is not None
    groups = {
        environment.target(balancer.stack, g) for g in environment.resource(balancer)["Properties"]["SecurityGroups"]
    }
    assert groups and None not in groups
    return groups  # type: ignore[return-value]


@pytest.mark.parametrize("env", SERVED)
def test_only_the_load_balancer_reaches_a_served_port(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    served = [f for f in environment.config.fleets if f.service is not None]
    assert served, f"{env} serves nothing"
    every_node = [layout for fleet in environment.config.fleets for layout in _node_layouts(environment, fleet)]
    for fleet in served:
        assert fleet.service is not None
        port = fleet.service.port
        balancer = _load_balancer_groups(environment, fleet)
        for receiver in _node_layouts(environment, fleet):
            assert tcp_passes(environment, balancer, receiver, port), (env, fleet.name)
            for sender in every_node:  # training nodes, other fleets' and this fleet's own nodes
                assert not tcp_passes(environment, sender, receiver, port), (env, fleet.name, sorted(sender, key=str))


@pytest.mark.parametrize("env", ENVS)
def test_training_tcp_has_a_group_of_its_own_off_the_shared_node_group(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    network = synth.stack(env, "Network")

    def self_rules(prefix: str) -> list[tuple[str, str, int, int]]:
        (logical_id,) = [k for k in network.resources("AWS::EC2::SecurityGroup") if k.startswith(prefix)]
        group = Ref(network.name, logical_id)
        return sorted(
            (direction, str(r["IpProtocol"]), r["FromPort"], r["ToPort"])
            for direction in ("Ingress", "Egress")
            for r in _rules(environment, group, direction)
            if environment.target(r["_stack"], r.get("SourceSecurityGroupId") or r.get("DestinationSecurityGroupId"))
            == group
        )

    low, high = TRAINING_TCP_PORTS
    assert self_rules("NodesSecurityGroup") == []  # every fleet carries it: nothing between its members
    assert self_rules("TrainingSecurityGroup") == [("Egress", "tcp", low, high), ("Ingress", "tcp", low, high)]
    # Carried by the training fleets' nodes only.
    (training,) = [
        Ref(network.name, k) for k in network.resources("AWS::EC2::SecurityGroup") if k.startswith("Training")
    ]
    for fleet in environment.config.fleets:
        for layout in _node_layouts(environment, fleet):
            assert (training in layout) is (fleet.role is FleetRole.TRAINING), (env, fleet.name)


@pytest.mark.parametrize("env", ENVS)
def test_the_job_document_carries_the_environments_job_settings(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    documents = {
        d["Properties"]["Name"]: d["Properties"]
        for d in synth.stack(env, "Fleets").resources("AWS::SSM::Document").values()
    }
    document = documents[ResourceNames.of(cfg).job_document]
    parameters = document["Content"]["parameters"]
    assert parameters["RendezvousEndpoint"]["default"] == f"127.0.0.1:{cfg.jobs.rendezvous_port}"
    assert parameters["MaxRestarts"]["default"] == str(cfg.jobs.max_restarts)
    assert document["UpdateMethod"] == "NewVersion"


@pytest.mark.parametrize("env", ENVS)
def test_a_jobs_output_reaches_its_encrypted_log_group(synth: Synth, env: str) -> None:
    environment = Environment(synth, env)
    cfg = environment.config
    names = ResourceNames.of(cfg)
    security = synth.stack(env, "Security")
    (group_id, group) = next(
        (k, v)
        for k, v in security.resources("AWS::Logs::LogGroup").items()
        if v["Properties"].get("LogGroupName") == names.job_log_group
    )
    props = group["Properties"]
    assert props["RetentionInDays"] == (cfg.jobs.log_retention_days or cfg.logging.retention_days)
    assert group["DeletionPolicy"] == ("Retain" if cfg.protect_stateful_resources else "Delete")

    # The runner's two calls, as the node role makes them, through the role's policies and the boundary.
    node = role(synth, env, "Security", "GpuNodeRole")
    group_arn = f"arn:aws:logs:{cfg.region}:{cfg.account}:log-group:{names.job_log_group}"
    stream = f"{group_arn}:log-stream:{names.job_log_stream('llama-ft', 'i-0123456789abcdef0')}"
    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        request = Request(action, stream, context=node.as_caller)
        assert role_may(node.identity, node.boundary, request), explain(node.identity, request)
    # Only that group: not another environment's, not the node log groups' retention or deletion.
    other = stream.replace(f"/{env}/jobs", "/other/jobs")
    assert not role_may(node.identity, node.boundary, Request("logs:PutLogEvents", other, context=node.as_caller))
    for action in ("logs:DeleteLogGroup", "logs:PutRetentionPolicy", "logs:DeleteLogStream"):
        assert not role_may(node.identity, node.boundary, Request(action, f"{group_arn}:*", context=node.as_caller))

    # CloudWatch Logs encrypts the events with the group's key: the key policy lets it, for this group.
    key = environment.target(security.name, props["KmsKeyId"])
    assert key is not None and key.logical_id.startswith("KeysLogs")
    key_arn = environment.resolve(key, {"Fn::GetAtt": [key.logical_id, "Arn"]})
    logs_service = {"Service": f"logs.{cfg.region}.amazonaws.com"}
    for action in ("kms:GenerateDataKey", "kms:Encrypt", "kms:Decrypt"):
        request = Request(action, key_arn, logs_service, {"kms:EncryptionContext:aws:logs:arn": group_arn})
        assert key_policy_may(environment.key_policy(key), request), (env, action, group_id)
