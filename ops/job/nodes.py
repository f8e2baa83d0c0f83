"""Which nodes of a training fleet a job runs on, its rendezvous endpoint and its processes per node.

A node qualifies when its Auto Scaling group reports it ``InService`` and ``Healthy`` (it has passed the
launch hook and its health checks), EC2 reports it ``running``, and, when the group launches into a
placement group, EC2 places it in that group (a node outside it would cross the fabric the job needs).
Nodes are taken in instance id order, so the same fleet gives the same choice; the rendezvous node (the
host of torchrun's c10d store) is the chosen node with the lowest instance id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.catalog import get_instance_type
from config.fleets import Fleet, FleetRole
from config.schema import Environment
from ops.job.context import JobContext, JobError


@dataclass(frozen=True)
class Node:
    instance_id: str
    instance_type: str
    private_ip: str
    zone: str
    placement_group: str | None = None


@dataclass(frozen=True)
class Selection:
    """The nodes chosen, and each node of the group left out with the reason."""

    fleet: Fleet
    group_name: str
    nodes: list[Node]
    skipped: list[tuple[str, str]] = field(default_factory=list)


def training_fleet(context: JobContext, name: str) -> Fleet:
    """The fleet ``name`` of the environment; it must be a training fleet."""
    return training_fleet_of(context.environment, context.config_file, name)


def training_fleet_of(environment: Environment, config_file: str, name: str, nodes: int | None = None) -> Fleet:
    """The training fleet ``name`` of ``environment`` (no AWS call); ``nodes`` may not exceed its
    ``capacity.max``: the group never holds more."""
    fleets = {f.name: f for f in environment.fleets}
    training = ", ".join(n for n, f in fleets.items() if f.role is FleetRole.TRAINING) or "none"
    if name not in fleets:
        raise JobError(
            f"{config_file}: fleets: no fleet named {name!r}; fix: use a training fleet of the file ({training})"
        )
    fleet = fleets[name]
    if fleet.role is not FleetRole.TRAINING:
        raise JobError(
            f"{config_file}: fleets: {name} is an {fleet.role.value} fleet, jobs run on training "
            f"fleets; fix: use one of: {training}"
        )
    if nodes is not None and nodes > fleet.capacity.max:
        raise JobError(
            f"--nodes: {nodes} is more than fleets[{name}].capacity.max ({fleet.capacity.max}) in {config_file}; "
            f"fix: raise fleets[{name}].capacity.max to at least {nodes} and deploy, or ask for fewer nodes"
        )
    return fleet


def _group(context: JobContext, group_name: str) -> dict[str, Any]:
    groups = context.aws.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group_name])
    if not groups["AutoScalingGroups"]:
        raise JobError(
            f"Auto Scaling group {group_name} not found in {context.environment.account} "
            f"{context.environment.region}; fix: deploy the environment ({context.names.stack_name('Fleets')})"
        )
    return groups["AutoScalingGroups"][0]


def running_instances(context: JobContext, instance_ids: list[str]) -> dict[str, dict[str, Any]]:
    """DescribeInstances of ``instance_ids`` by id; an id EC2 no longer knows is absent (a filter, not a
    list of ids, so that one unknown id does not fail the call)."""
    if not instance_ids:
        return {}
    found = context.aws.pages(
        "ec2", "describe_instances", "Reservations", Filters=[{"Name": "instance-id", "Values": instance_ids}]
    )
    return {i["InstanceId"]: i for r in found for i in r["Instances"]}


def healthy_nodes(context: JobContext, fleet: Fleet) -> Selection:
    """Every node of ``fleet`` that may run a job, in instance id order, and those left out with why."""
    group_name = context.names.asg_name(fleet.name)
    group = _group(context, group_name)
    placement_group = group.get("PlacementGroup") or None
    members = sorted(group.get("Instances", []), key=lambda i: i["InstanceId"])
    described = running_instances(context, [m["InstanceId"] for m in members])
    nodes: list[Node] = []
    skipped: list[tuple[str, str]] = []
    for member in members:
        instance_id = member["InstanceId"]
        instance = described.get(instance_id, {})
        state = instance.get("State", {}).get("Name", "unknown")
        in_group = instance.get("Placement", {}).get("GroupName") or None
        if (member["LifecycleState"], member["HealthStatus"]) != ("InService", "Healthy"):
            skipped.append((instance_id, f"{member['LifecycleState']}, {member['HealthStatus']}"))
        elif state != "running" or not instance.get("PrivateIpAddress"):
            skipped.append((instance_id, f"EC2 state {state}"))
        elif placement_group and in_group != placement_group:
            skipped.append((instance_id, f"outside the placement group {placement_group} (in {in_group or 'none'})"))
        else:
            nodes.append(
                Node(
                    instance_id=instance_id,
                    instance_type=instance["InstanceType"],
                    private_ip=instance["PrivateIpAddress"],
                    zone=instance.get("Placement", {}).get("AvailabilityZone", ""),
                    placement_group=in_group,
                )
            )
    return Selection(fleet=fleet, group_name=group_name, nodes=nodes, skipped=skipped)


def pick_nodes(context: JobContext, fleet_name: str, count: int | None = None) -> Selection:
    """``count`` nodes of the training fleet ``fleet_name`` (all that qualify when None), lowest ids first.

    Too few nodes is a ``JobError`` that says how many qualify, why the others do not, and how to get more.
    """
    fleet = training_fleet(context, fleet_name)
    selection = healthy_nodes(context, fleet)
    wanted = len(selection.nodes) if count is None else count
    if wanted < 1 or len(selection.nodes) < wanted:
        raise JobError(_too_few(context, selection, max(wanted, 1)), code=1)
    return Selection(fleet, selection.group_name, selection.nodes[:wanted], selection.skipped)


def _too_few(context: JobContext, selection: Selection, wanted: int) -> str:
    have = len(selection.nodes)
    others = "; ".join(f"{i}: {why}" for i, why in selection.skipped)
    left_out = f" (left out: {others})" if others else ""
    maximum = selection.fleet.capacity.max
    if wanted > maximum:
        fix = (
            f"raise fleets[{selection.fleet.name}].capacity.max to at least {wanted} in {context.config_file} and "
            "deploy, or ask for fewer nodes with --nodes"
        )
    else:
        fix = (
            f"raise the group's desired capacity (aws autoscaling set-desired-capacity --auto-scaling-group-name "
            f"{selection.group_name} --desired-capacity {wanted}) and run the job once the nodes are InService, "
            "or ask for fewer nodes with --nodes"
        )
    return (
        f"fleet {selection.fleet.name}: {have} node{'' if have == 1 else 's'} InService and Healthy, the job needs "
        f"{wanted}{left_out}; fix: {fix}"
    )


def rendezvous_endpoint(nodes: list[Node], port: int) -> str:
    """``<private IPv4>:<port>`` of the node with the lowest instance id: torchrun's c10d store."""
    host = min(nodes, key=lambda n: n.instance_id)
    return f"{host.private_ip}:{port}"


def procs_per_node(nodes: list[Node]) -> int:
    """The catalog's GPU count of the nodes' instance types. torchrun starts the same number of processes on
    every node, so types of one GPU count mix (dev's g6.xlarge and g6.2xlarge, one L4 each) and nodes whose
    types have different GPU counts are refused."""
    gpus = {t: get_instance_type(t).gpu_count for t in sorted({n.instance_type for n in nodes})}
    if len(set(gpus.values())) != 1:
        counts = "; ".join(
            f"{t}: {g} GPU{'' if g == 1 else 's'}, {_count(sum(n.instance_type == t for n in nodes), 'node')}"
            for t, g in gpus.items()
        )
        raise JobError(
            f"the chosen nodes' instance types have different GPU counts ({counts}); torchrun starts the same "
            "number of processes on every node; fix: keep instance types of one GPU count in the fleet's "
            "instance_types (or replace the odd nodes: aws autoscaling terminate-instance-in-auto-scaling-group)",
            code=1,
        )
    return next(iter(gpus.values()))


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
