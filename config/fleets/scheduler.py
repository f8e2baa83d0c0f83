"""A training fleet's scheduler: ``scheduler: none`` (the default: an Auto Scaling group, jobs through
``gpu-platform job`` over SSM) or ``scheduler: slurm`` (AWS Parallel Computing Service compute node groups behind
a Slurm queue of the environment's PCS cluster, config/slurm.py).

What PCS asks of a fleet, and the split of a fleet's capacity into compute node groups (PCS takes one purchase
option per node group: ``PurchaseOption`` of AWS::PCS::ComputeNodeGroup), are decided here, before synth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from config.catalog import efa_layout, get_instance_type

if TYPE_CHECKING:
    from config.fleets.fleet import Fleet


class Scheduler(StrEnum):
    NONE = "none"
    SLURM = "slurm"


class PurchaseOption(StrEnum):
    """``PurchaseOption`` of AWS::PCS::ComputeNodeGroup (its registry schema's enum). An On-Demand Capacity
    Reservation is launched as ONDEMAND with the reservation in the launch template (PCS API reference,
    CreateComputeNodeGroup: "Choose On-Demand if you plan to use an On-Demand Capacity Reservation")."""

    ONDEMAND = "ONDEMAND"
    SPOT = "SPOT"
    CAPACITY_BLOCK = "CAPACITY_BLOCK"


#: Spot allocation strategies PCS takes (``SpotOptions.AllocationStrategy`` of AWS::PCS::ComputeNodeGroup).
PCS_SPOT_STRATEGIES = ("lowest-price", "capacity-optimized", "price-capacity-optimized")


@dataclass(frozen=True)
class NodeGroupPlan:
    """One compute node group of a Slurm fleet: its purchase option and its share of the fleet's min and max."""

    purchase: PurchaseOption
    min: int
    max: int

    @property
    def key(self) -> str:
        """The node group's short name: ``spot``, ``ondemand``, ``block``."""
        return {"ONDEMAND": "ondemand", "SPOT": "spot", "CAPACITY_BLOCK": "block"}[self.purchase.value]


def node_group_plans(fleet: Fleet) -> list[NodeGroupPlan]:
    """The fleet's compute node groups: its Capacity Block alone, else On-Demand (with its reservation, if any)
    and Spot in the fleet's mix. The max of the On-Demand group is the On-Demand base plus the On-Demand
    percentage of the rest (rounded up), the Spot group takes the remainder, so that the queue never runs more
    than ``capacity.max`` nodes; ``capacity.min`` goes to On-Demand first. A group whose max would be 0 is left
    out, unless the fleet's max is 0 (then one group of 0, which is how a fleet is held at 0)."""
    cap = fleet.capacity
    if fleet.capacity_block is not None:
        return [NodeGroupPlan(PurchaseOption.CAPACITY_BLOCK, cap.min, cap.max)]
    base = min(fleet.on_demand_base_capacity, cap.max)
    on_demand_max = base + math.ceil((cap.max - base) * fleet.on_demand_percentage_above_base / 100)
    on_demand_min = min(cap.min, on_demand_max)
    plans = [
        NodeGroupPlan(PurchaseOption.ONDEMAND, on_demand_min, on_demand_max),
        NodeGroupPlan(PurchaseOption.SPOT, cap.min - on_demand_min, cap.max - on_demand_max),
    ]
    kept = [plan for plan in plans if plan.max > 0]
    return kept or [plans[1] if fleet.uses_spot else plans[0]]


def slurm_fleet_problems(fleet: Fleet) -> list[str]:
    """One ``@field: ...; fix: ...`` line per setting of a ``scheduler: slurm`` fleet that PCS cannot take."""
    if fleet.scheduler is not Scheduler.SLURM:
        return []
    if fleet.role.value != "training" or fleet.service is not None:
        return [
            f"@scheduler: slurm queues training jobs and {fleet.name!r} is a served or inference fleet (its nodes "
            "serve behind a load balancer, which PCS nodes do not join); fix: remove scheduler, or use it on a "
            "training fleet without service"
        ]
    name = (
        [
            f"@name: {fleet.name!r} names the fleet's Slurm queue, and a PCS queue name has 3 to 25 characters; fix: "
            "give the fleet a name of 3 characters or more"
        ]
        if len(fleet.name) < 3
        else []
    )
    return [
        *name,
        *_elastic_problems(fleet),
        *_node_group_problems(fleet),
        *_block_problems(fleet),
        *_reservation_problems(fleet),
    ]


def _elastic_problems(fleet: Fleet) -> list[str]:
    """PCS starts nodes when jobs wait and stops them after the cluster's idle time: nothing else sizes them."""
    problems = []
    for key, what in (
        ("scaling", "GPU-utilization policies and schedules"),
        ("warm_pool", "a warm pool"),
        ("refresh", "an instance refresh"),
    ):
        if getattr(fleet, key) is not None:
            problems.append(
                f"@{key}: a Slurm fleet has no Auto Scaling group for {what}: PCS starts nodes when jobs wait and "
                f"stops them after slurm.scale_down_idle_seconds; fix: remove {key}"
            )
    if fleet.capacity.desired is not None:
        problems.append(
            "@capacity.desired: PCS sizes a Slurm fleet between capacity.min and capacity.max by the jobs in its "
            "queue; fix: remove desired"
        )
    strategy = fleet.spot_allocation_strategy.value
    if fleet.uses_spot and strategy not in PCS_SPOT_STRATEGIES:
        problems.append(
            f"@spot_allocation_strategy: {strategy} is not one PCS takes; fix: use one of {', '.join(PCS_SPOT_STRATEGIES)}"
        )
    return problems


def _node_group_problems(fleet: Fleet) -> list[str]:
    """A compute node group's instance types share their vCPU count, processor architecture and EFA support
    (AWS PCS User Guide, "Create or update compute node groups for EFA"); with EFA, one launch template serves
    them all, so they share their EFA interface layout too. Every catalog type is x86_64."""
    first = get_instance_type(fleet.instance_types[0])
    layout = efa_layout(first.instance_type) if fleet.efa else None
    problems = []
    for i, name in enumerate(fleet.instance_types[1:], start=1):
        item = get_instance_type(name)
        if item.vcpus != first.vcpus:
            problems.append(
                f"@instance_types[{i}]: {name} has {item.vcpus} vCPUs and {first.instance_type} {first.vcpus}: a PCS "
                "compute node group takes instance types with the same vCPU count, architecture and EFA support; "
                "fix: list types of one size (e.g. only the first), or make a second Slurm fleet for the other size"
            )
        elif fleet.efa and efa_layout(name) != layout:
            problems.append(
                f"@instance_types[{i}]: {name} has another EFA interface layout than {first.instance_type}: the "
                "fleet's one launch template serves every type of its node groups; fix: list types of one layout"
            )
    return problems


def _block_problems(fleet: Fleet) -> list[str]:
    """A Capacity Block node group: maxInstanceCount must not exceed the block's size (AWS PCS User Guide,
    "Configure an AWS PCS compute node group to use a Capacity Block")."""
    block = fleet.capacity_block
    if block is None:
        return []
    if block.instance_count is None:
        return [
            "@capacity_block.instance_count: a Slurm fleet's Capacity Block node group may not exceed the block's "
            "size, which the config must give; fix: add instance_count: the block's number of instances"
        ]
    if fleet.capacity.max > block.instance_count:
        return [
            f"@capacity.max: {fleet.capacity.max} is more than the Capacity Block's {block.instance_count} "
            "instances (PCS refuses a node group larger than its block); fix: lower capacity.max to "
            f"{block.instance_count} or less"
        ]
    return []


def _reservation_problems(fleet: Fleet) -> list[str]:
    """A PCS node group launches from its launch template, whose CapacityReservationTarget names one reservation
    or one reservation group (EC2 LaunchTemplateCapacityReservationSpecificationRequest); an Auto Scaling group
    takes a list of ids, a launch template does not."""
    reservation = fleet.capacity_reservation
    if reservation is None or len(reservation.ids) + len(reservation.resource_group_arns) <= 1:
        return []
    return [
        "@capacity_reservation: a Slurm fleet's On-Demand node group targets one reservation or one reservation "
        "group (its launch template takes one); fix: put the reservations in a resource group and give its ARN "
        "as the only entry of resource_group_arns"
    ]
