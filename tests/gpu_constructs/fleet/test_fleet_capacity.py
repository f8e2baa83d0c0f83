"""fleet_capacity: the mixed-instances policy lists each type in the catalog's order with its layout's template
(only where a fleet has several), On-Demand by priority, the rest Spot by the fleet's strategy; a reservation
sets the group's preference and its one kind of target; a placement group carries only its pinned tags."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2

from config.catalog import get_instance_type
from config.fleets import CapacityReservation, ReservationPreference
from gpu_constructs.fleet.fleet_capacity import Layout, mixed_instances_policy, placement_group, reserve_capacity
from tests.gpu_constructs.helpers import bare_stack, fleet, only, template

#: An EFA training fleet of p5 and p4d, in one zone and one cluster.
TRAINING = {"role": "training", "efa": True, "placement": "cluster", "availability_zones": ["us-east-1a"]}

P5, P4D = get_instance_type("p5.48xlarge"), get_instance_type("p4d.24xlarge")
EFA_ONLY: Layout = (tuple(range(P5.max_efa_interfaces)), True)
EFA4: Layout = ((0, 1, 2, 3), False)


def _group(stack: Stack) -> autoscaling.CfnAutoScalingGroup:
    return autoscaling.CfnAutoScalingGroup(stack, "Group", min_size="0", max_size="1")


def _group_properties(stack: Stack) -> dict[str, Any]:
    properties: dict[str, Any] = only(template(stack), "AWS::AutoScaling::AutoScalingGroup")[1]["Properties"]
    return properties


def test_each_type_in_preference_order_with_its_layouts_template() -> None:
    stack = bare_stack()
    templates = {EFA_ONLY: ec2.LaunchTemplate(stack, "EfaOnly"), EFA4: ec2.LaunchTemplate(stack, "Efa4")}
    config = fleet(
        **TRAINING,
        instance_types=["p5.48xlarge", "p4d.24xlarge"],
        on_demand_base_capacity=1,
        on_demand_percentage_above_base=50,
    )
    policy = mixed_instances_policy(config, [P5, P4D], {EFA_ONLY: [P5], EFA4: [P4D]}, templates)
    overrides = policy.launch_template_overrides or []
    assert [o.instance_type.to_string() for o in overrides if o.instance_type] == ["p5.48xlarge", "p4d.24xlarge"]
    assert [o.launch_template for o in overrides] == [templates[EFA_ONLY], templates[EFA4]]
    assert policy.launch_template is templates[EFA_ONLY]
    distribution = policy.instances_distribution
    assert distribution is not None
    assert distribution.on_demand_allocation_strategy is autoscaling.OnDemandAllocationStrategy.PRIORITIZED
    assert (distribution.on_demand_base_capacity, distribution.on_demand_percentage_above_base_capacity) == (1, 50)
    assert distribution.spot_allocation_strategy is autoscaling.SpotAllocationStrategy.PRICE_CAPACITY_OPTIMIZED


def test_one_template_is_the_policys_own_and_no_override_names_it() -> None:
    stack = bare_stack()
    standard: Layout = ((), False)
    only_template = ec2.LaunchTemplate(stack, "Standard")
    config = fleet(spot_allocation_strategy="capacity-optimized")
    types = [get_instance_type(t) for t in config.instance_types]
    policy = mixed_instances_policy(config, types, {standard: types}, {standard: only_template})
    assert policy.launch_template is only_template
    assert [o.launch_template for o in policy.launch_template_overrides or []] == [None, None]
    assert policy.instances_distribution is not None
    assert (
        policy.instances_distribution.spot_allocation_strategy is autoscaling.SpotAllocationStrategy.CAPACITY_OPTIMIZED
    )


def test_no_reservation_leaves_the_group_alone() -> None:
    stack = bare_stack()
    reserve_capacity(fleet(), _group(stack))
    assert "CapacityReservationSpecification" not in _group_properties(stack)


def test_a_reservation_sets_the_preference_and_its_targets() -> None:
    cases = [
        (
            CapacityReservation(preference=ReservationPreference.ONLY, ids=["cr-0123456789abcdef0"]),
            {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
        ),
        (
            CapacityReservation(
                preference=ReservationPreference.FIRST, resource_group_arns=["arn:aws:resource-groups:g/odcrs"]
            ),
            {"CapacityReservationResourceGroupArns": ["arn:aws:resource-groups:g/odcrs"]},
        ),
    ]
    for reservation, target in cases:
        stack = bare_stack()
        reserve_capacity(fleet(capacity_reservation=reservation), _group(stack))
        assert _group_properties(stack)["CapacityReservationSpecification"] == {
            "CapacityReservationPreference": reservation.preference.value,
            "CapacityReservationTarget": target,
        }
    stack = bare_stack()
    reserve_capacity(
        fleet(capacity_reservation=CapacityReservation(preference=ReservationPreference.NONE)), _group(stack)
    )
    assert _group_properties(stack)["CapacityReservationSpecification"] == {"CapacityReservationPreference": "none"}


def test_no_placement_group_without_placement() -> None:
    stack = bare_stack()
    assert placement_group(stack, fleet(), _group(stack), {"Team": "ml"}) is None
    template(stack).resource_count_is("AWS::EC2::PlacementGroup", 0)


def test_a_placement_group_carries_its_pinned_tags_in_order_and_the_group_launches_into_it() -> None:
    stack = bare_stack()
    group = placement_group(stack, fleet(placement="spread"), _group(stack), {"b": "2", "a": "1"})
    assert group is not None and group.node.id == "PlacementGroup"
    placement_id, placement = only(template(stack), "AWS::EC2::PlacementGroup")
    assert placement["Properties"] == {
        "Strategy": "spread",
        "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}],
    }
    assert _group_properties(stack)["PlacementGroup"] == {"Ref": placement_id}
    stack = bare_stack()
    placement_group(stack, fleet(placement="spread"), _group(stack), None)
    assert "Tags" not in only(template(stack), "AWS::EC2::PlacementGroup")[1]["Properties"]
