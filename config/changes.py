"""Config edits that CloudFormation cannot apply in place to a running environment.

Compares an environment as deployed (``before``) with the edited one (``after``). Each edit listed here
changes a create-only property (CloudFormation registry schema ``createOnlyProperties``) of a resource
that holds state or that running nodes use, so the update would replace it under them, or (a smaller
file system) the update fails. Each change names the field, what would happen and the safe way.
tests/update/test_update_matrix.py proves the list against synthesized templates.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from config.fleets import Placement, Scheduler, node_group_plans
from config.network import EgressMode
from config.schema import Environment
from config.slurm import Slurm

_NEW_ENV = "deploy a new environment with the new value beside this one and move the work to it"


@dataclass(frozen=True)
class Change:
    field: str
    message: str
    safe_way: str


def unsafe_changes(before: Environment, after: Environment) -> list[Change]:
    """The edits from ``before`` to ``after`` that would replace a resource in use (or fail), in field order."""
    return [
        *_network(before, after),
        *_storage(before, after),
        *_placement(before, after),
        *_services(before, after),
        *_scheduler(before, after),
        *_node_groups(before, after),
    ]


def _network(before: Environment, after: Environment) -> Iterator[Change]:
    fields = {
        "network.vpc_cidr": (before.network.vpc_cidr, after.network.vpc_cidr),
        "network.egress": (before.network.egress, after.network.egress),
        "network.gpu_subnet_mask": (before.network.gpu_subnet_mask, after.network.gpu_subnet_mask),
        "availability_zones": (before.availability_zones, after.availability_zones),
    }
    if before.network.egress is after.network.egress is EgressMode.NAT:  # isolated VPCs have no public subnets
        fields["network.public_subnet_mask"] = (before.network.public_subnet_mask, after.network.public_subnet_mask)
    for field, (old, new) in fields.items():
        if old != new:
            yield Change(
                field,
                f"{_shown(old)} -> {_shown(new)} re-creates the VPC's subnets (CidrBlock and AvailabilityZone are "
                "create-only) under every node, load balancer and file system",
                _NEW_ENV,
            )


def _storage(before: Environment, after: Environment) -> Iterator[Change]:
    old, new = before.storage.file_system, after.storage.file_system
    where = "deleted with its unexported data" if not after.protect_stateful_resources else "left unmanaged"
    replaced = f"replaces the file system: the old one is {where}, and every node loses /fsx until it is replaced"
    safe = (
        "scale every fleet to 0, let the data repository associations finish exporting (or export with a data "
        "repository task), then deploy and scale back; or add the new file system in a new environment"
    )
    if old.deployment_type != new.deployment_type:
        field = "storage.file_system.deployment_type"
        yield Change(
            field, f"{old.deployment_type} -> {new.deployment_type} {replaced} (DeploymentType is create-only)", safe
        )
    if old.availability_zone != new.availability_zone:
        field = "storage.file_system.availability_zone"
        yield Change(
            field, f"{old.availability_zone} -> {new.availability_zone} {replaced} (SubnetIds is create-only)", safe
        )
    yield from _associations(before, after)
    if new.storage_capacity_gib < old.storage_capacity_gib:
        yield Change(
            "storage.file_system.storage_capacity_gib",
            f"{old.storage_capacity_gib} -> {new.storage_capacity_gib}: FSx for Lustre cannot shrink a file "
            "system (the update fails and rolls back)",
            f"keep {old.storage_capacity_gib} or more; to shrink, move the data to a new, smaller file system",
        )


def _associations(before: Environment, after: Environment) -> Iterator[Change]:
    """A kept directory linked to another prefix, or a kept prefix to another directory: CloudFormation creates
    the new association before it deletes the old one, and FSx refuses a directory or prefix already linked."""
    by_path = {a.file_system_path: a.bucket_prefix for a in before.storage.associations}
    by_prefix = {a.bucket_prefix: a.file_system_path for a in before.storage.associations}
    for i, dra in enumerate(after.storage.associations):
        old_prefix, old_path = by_path.get(dra.file_system_path), by_prefix.get(dra.bucket_prefix)
        if (old_prefix or dra.bucket_prefix) != dra.bucket_prefix or (
            old_path or dra.file_system_path
        ) != dra.file_system_path:
            yield Change(
                f"storage.associations[{i}]",
                f"{dra.file_system_path} <-> {dra.bucket_prefix} re-links a directory or prefix linked now "
                f"({dra.file_system_path} <-> {old_prefix or '-'}, {old_path or '-'} <-> {dra.bucket_prefix}): the "
                "new association is created before the old one is deleted, and FSx refuses the second link (the "
                "update fails and rolls back)",
                "remove the association and deploy, then add it with the new directory or prefix and deploy again",
            )


def _placement(before: Environment, after: Environment) -> Iterator[Change]:
    kept = {f.name: f for f in before.fleets if f.placement is not Placement.NONE}
    in_groups = [f for f in after.fleets if f.name in kept]
    safe = (
        "scale the fleet(s) {names} to 0 first (a placement group cannot be deleted while instances run in it), "
        "deploy, then scale back"
    )
    for i, fleet in enumerate(after.fleets):
        old = kept.get(fleet.name)
        if old is not None and old.placement is not fleet.placement:
            yield Change(
                f"fleets[{i}].placement",
                f"{old.placement.value} -> {fleet.placement.value} re-creates the placement group of fleet "
                f"{fleet.name!r} (Strategy is create-only; none removes it) under its running nodes",
                safe.format(names=repr(fleet.name)),
            )
    if in_groups and before.pinned_placement_group_tags != after.pinned_placement_group_tags:
        names = ", ".join(repr(f.name) for f in in_groups)
        if after.placement_group_tags is None:
            field, fix = (
                "tags",
                (
                    f"keep the placement groups' tags: add placement_group_tags: {before.pinned_placement_group_tags} "
                    "(then edit tags freely); or " + safe.format(names=names)
                ),
            )
        else:
            field, fix = "placement_group_tags", safe.format(names=names)
        yield Change(
            field,
            f"changes the tags of the placement groups of {names}, which re-creates them (Tags is create-only for "
            "AWS::EC2::PlacementGroup) under their running nodes",
            fix,
        )


def _services(before: Environment, after: Environment) -> Iterator[Change]:
    served = {f.name: f.service for f in before.fleets if f.service is not None}
    safe = "add a second served fleet with the new value beside this one, move the clients to its load balancer, then remove this fleet"
    for i, fleet in enumerate(after.fleets):
        old = served.get(fleet.name)
        if old is None or fleet.service is None:
            continue
        if old.port != fleet.service.port:
            yield Change(
                f"fleets[{i}].service.port",
                f"{old.port} -> {fleet.service.port} replaces the target group of fleet {fleet.name!r} (Port is "
                "create-only): the listener moves to a new, empty group and serves 503 until every node runs the new port",
                safe,
            )
        if old.load_balancer.internal != fleet.service.load_balancer.internal:
            yield Change(
                f"fleets[{i}].service.load_balancer.internal",
                f"{old.load_balancer.internal} -> {fleet.service.load_balancer.internal} replaces the load balancer "
                f"of fleet {fleet.name!r} (Scheme is create-only): its DNS name changes under the clients",
                safe,
            )


def _shown(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(getattr(value, "value", value))


def _scheduler(before: Environment, after: Environment) -> Iterator[Change]:
    """A fleet moved between Auto Scaling and Slurm loses its nodes; a Slurm fleet's instance types and a PCS
    cluster's size are create-only (a compute node group's InstanceConfigs, a cluster's Size)."""
    previous = {f.name: f for f in before.fleets}
    for i, fleet in enumerate(after.fleets):
        old = previous[fleet.name].scheduler if fleet.name in previous else None
        if old is fleet.scheduler is Scheduler.SLURM:
            types = set(previous[fleet.name].instance_types)
            if types != set(fleet.instance_types):  # InstanceConfigs is a set (insertionOrder false): order is free
                yield Change(
                    f"fleets[{i}].instance_types",
                    f"{_shown(sorted(types))} -> {_shown(sorted(fleet.instance_types))} replaces fleet "
                    f"{fleet.name!r}'s PCS node groups (InstanceConfigs is create-only): their nodes stop, running "
                    "jobs with them",
                    "drain the queue (scontrol update partition=NAME state=drain) and deploy when no job runs; or add "
                    "a Slurm fleet with the new types beside this one, move the work, then remove this fleet",
                )
        elif old is not None and old is not fleet.scheduler:
            yield Change(
                f"fleets[{i}].scheduler",
                f"{old.value} -> {fleet.scheduler.value} deletes, of fleet {fleet.name!r}, the "
                + ("Auto Scaling group with its running nodes" if old.value == "none" else "PCS node groups and queue"),
                "add a new fleet with the other scheduler beside this one, move the work, then remove this fleet",
            )
    if before.slurm is not None and after.slurm is not None:
        yield from _cluster(before.slurm, after.slurm)


def _node_groups(before: Environment, after: Environment) -> Iterator[Change]:
    """A Slurm fleet's node group that an edit removes (its max would be 0, a Capacity Block added or removed) is
    deleted with its nodes: PCS terminates them and the jobs on them."""
    previous = {f.name: f for f in before.fleets if f.scheduler is Scheduler.SLURM}
    for i, fleet in enumerate(after.fleets):
        old = previous.get(fleet.name)
        if old is None or fleet.scheduler is not Scheduler.SLURM:
            continue
        # A group of max 0 (a fleet held at 0) holds no node: changing it stops nothing.
        had = {p.key for p in node_group_plans(old) if p.max > 0}
        gone = sorted(had - {p.key for p in node_group_plans(fleet)})
        if gone:
            yield Change(
                f"fleets[{i}].capacity",
                f"removes fleet {fleet.name!r}'s {', '.join(gone)} PCS node group(s) (capacity, On-Demand share or "
                "Capacity Block): PCS terminates their nodes with the jobs on them",
                "drain the queue (scontrol update partition=NAME state=drain) and deploy when no job runs; or keep "
                "each group's max above 0",
            )


def _cluster(before: Slurm, after: Slurm) -> Iterator[Change]:
    """What PCS cannot change on a running cluster without stopping its work."""
    if before.cluster_size != after.cluster_size:
        yield Change(
            "slurm.cluster_size",
            f"{before.cluster_size.value} -> {after.cluster_size.value} replaces the PCS cluster (Size is "
            "create-only): every queue and node group with it, running jobs, and the accounting database",
            "drain the queues and deploy when no job runs (accounting history starts anew); or size a new environment",
        )
    if before.accounting and not after.accounting:
        yield Change(
            "slurm.accounting",
            "true -> false: PCS cannot turn accounting off on a cluster (Slurm accounting in AWS PCS), the update fails",
            "keep accounting on; a cluster without it is a new environment",
        )
    if before.slurm_version != after.slurm_version:
        yield Change(
            "slurm.slurm_version",
            f"{before.slurm_version} -> {after.slurm_version}: PCS updates the controller, but every node must run its "
            "Slurm and the golden AMI carries one version (PCS's rolling update needs AMIs with both), so running "
            "nodes and their jobs stop",
            "change slurm_version and the building environment's PcsSlurmVersion in one commit, drain the queues, "
            "deploy the builder and wait for its new AMI, then deploy this environment when no job runs",
        )
    if before.login.instance_type != after.login.instance_type:
        yield Change(
            "slurm.login.instance_type",
            f"{before.login.instance_type} -> {after.login.instance_type} replaces the login node group "
            "(InstanceConfigs is create-only): open sessions end and files on the login nodes' disks are lost",
            "tell the people, keep work under /fsx, and deploy when no session is open",
        )
