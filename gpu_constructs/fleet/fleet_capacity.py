"""How a fleet's Auto Scaling group takes its capacity: the Spot/On-Demand mix over its launch templates (one per
EFA interface layout), the capacity reservations it prefers or targets, and the placement group it launches into."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import CfnTag
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from config.catalog import InstanceType
from config.fleets import Fleet, Placement

#: An EFA interface layout: the network cards that carry an EFA interface, and whether those are EFA-only.
Layout = tuple[tuple[int, ...], bool]

_SPOT_STRATEGY = {
    "price-capacity-optimized": autoscaling.SpotAllocationStrategy.PRICE_CAPACITY_OPTIMIZED,
    "capacity-optimized": autoscaling.SpotAllocationStrategy.CAPACITY_OPTIMIZED,
    "capacity-optimized-prioritized": autoscaling.SpotAllocationStrategy.CAPACITY_OPTIMIZED_PRIORITIZED,
    "lowest-price": autoscaling.SpotAllocationStrategy.LOWEST_PRICE,
}


def mixed_instances_policy(
    fleet: Fleet,
    instance_types: Sequence[InstanceType],
    layouts: Mapping[Layout, Sequence[InstanceType]],
    templates: Mapping[Layout, ec2.ILaunchTemplate],
) -> autoscaling.MixedInstancesPolicy:
    """The catalog's preference order across layouts, each type with its layout's template (where there are
    several), On-Demand by priority up to the fleet's base and percentage, the rest Spot by its strategy."""
    layout_of = {item.instance_type: layout for layout, items in layouts.items() for item in items}
    several = len(templates) > 1
    overrides = [
        autoscaling.LaunchTemplateOverrides(
            instance_type=ec2.InstanceType(item.instance_type),
            launch_template=templates[layout_of[item.instance_type]] if several else None,
        )
        for item in instance_types
    ]
    return autoscaling.MixedInstancesPolicy(
        launch_template=next(iter(templates.values())),
        launch_template_overrides=overrides,
        instances_distribution=autoscaling.InstancesDistribution(
            on_demand_allocation_strategy=autoscaling.OnDemandAllocationStrategy.PRIORITIZED,
            on_demand_base_capacity=fleet.on_demand_base_capacity,
            on_demand_percentage_above_base_capacity=fleet.on_demand_percentage_above_base,
            spot_allocation_strategy=_SPOT_STRATEGY[fleet.spot_allocation_strategy.value],
        ),
    )


def reserve_capacity(fleet: Fleet, cfn_group: autoscaling.CfnAutoScalingGroup) -> None:
    """The group's capacity reservation preference and target, where the fleet configures a reservation."""
    reservation = fleet.capacity_reservation
    if reservation is None:
        return
    spec: dict = {"CapacityReservationPreference": reservation.preference.value}
    target = {}
    if reservation.ids:
        target["CapacityReservationIds"] = list(reservation.ids)
    if reservation.resource_group_arns:
        target["CapacityReservationResourceGroupArns"] = list(reservation.resource_group_arns)
    if target:
        spec["CapacityReservationTarget"] = target
    cfn_group.add_property_override("CapacityReservationSpecification", spec)


def placement_group(
    scope: Construct, fleet: Fleet, cfn_group: autoscaling.CfnAutoScalingGroup, tags: Mapping[str, str] | None
) -> ec2.CfnPlacementGroup | None:
    """The fleet's placement group in ``scope`` (``PlacementGroup``), set on the group; None with ``placement:
    none``. ``tags``: the environment's pinned placement group tags."""
    if fleet.placement is Placement.NONE:
        return None
    # Tags is create-only for a placement group: its own pinned set (Environment.placement_group_tags),
    # never the environment's tags, so that a tag edit does not re-create the group under running nodes.
    pinned = [CfnTag(key=k, value=v) for k, v in sorted((tags or {}).items())]
    group = ec2.CfnPlacementGroup(scope, "PlacementGroup", strategy=fleet.placement.value, tags=pinned or None)
    cfn_group.add_property_override("PlacementGroup", group.ref)
    return group
