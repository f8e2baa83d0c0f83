"""GpuFleet: the EFA layout of each instance type's launch template, the Spot/On-Demand mix, hooks that hold
launches (ABANDON) and let terminations go (CONTINUE), placement, reserved capacity and Capacity Blocks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from config.catalog import get_instance_type
from config.fleets import Capacity, CapacityBlock, CapacityReservation, Scaling, TargetTracking
from config.fleets.health import BOOTSTRAP_SECONDS, DCGM_LEVEL_SECONDS, DEFAULT_DCGM_LEVEL
from gpu_constructs.fleet.gpu_fleet import TERMINATE_HOOK_TIMEOUT, GpuFleet
from tests.gpu_constructs.helpers import REGION, bare_stack, fleet, key, only, template, vpc

GROUP = "gpu-platform-dev-train"


def _build(**overrides: object) -> Template:
    config = fleet(**overrides)
    stack = bare_stack()
    network = vpc(stack)
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    GpuFleet(
        stack,
        "Fleet",
        fleet=config,
        group_name=GROUP,
        instance_types=[get_instance_type(t) for t in config.instance_types],
        vpc=network,
        subnets=ec2.SubnetSelection(subnet_group_name="gpu"),
        machine_image=ec2.MachineImage.generic_linux({REGION: "ami-0123456789abcdef0"}),
        user_data=ec2.UserData.for_linux(),
        instance_profile=iam.InstanceProfile(stack, "Profile", role=role),
        node_security_group=ec2.SecurityGroup(stack, "NodeSg", vpc=network),
        efa_security_group=ec2.SecurityGroup(stack, "EfaSg", vpc=network),
        volume_key=key(stack),
        notification_topic=sns.Topic(stack, "Alerts"),
        metrics_namespace="GpuPlatform/dev",
    )
    return template(stack)


def _group(tmpl: Template) -> dict:
    return only(tmpl, "AWS::AutoScaling::AutoScalingGroup")[1]["Properties"]


def _interfaces(tmpl: Template) -> dict[str, list[dict]]:
    return {
        lid: t["Properties"]["LaunchTemplateData"].get("NetworkInterfaces", [])
        for lid, t in tmpl.find_resources("AWS::EC2::LaunchTemplate").items()
    }


@pytest.fixture(scope="module")
def efa_mixed() -> Template:
    """p5 and p4d in one EFA fleet: two layouts, two launch templates, one group."""
    return _build(
        name="train",
        role="training",
        instance_types=["p5.48xlarge", "p4d.24xlarge"],
        efa=True,
        placement="cluster",
        availability_zones=["us-east-1a"],
        on_demand_percentage_above_base=50,
        capacity_reservation=CapacityReservation(preference="capacity-reservations-first"),
    )


def test_p4d_template_has_four_efa_interfaces_in_both_groups(efa_mixed: Template) -> None:
    (p4d,) = [nics for lid, nics in _interfaces(efa_mixed).items() if "TemplateEfa4" in lid]
    assert [(n["NetworkCardIndex"], n["DeviceIndex"], n["InterfaceType"]) for n in p4d] == [
        (0, 0, "efa"), (1, 1, "efa"), (2, 1, "efa"), (3, 1, "efa"),
    ]  # fmt: skip
    assert all(len(n["Groups"]) == 2 and "AssociatePublicIpAddress" not in n for n in p4d)


def test_p5_template_has_an_ena_primary_then_efa_only_interfaces(efa_mixed: Template) -> None:
    (p5,) = [nics for lid, nics in _interfaces(efa_mixed).items() if "TemplateEfaOnly" in lid]
    cards = get_instance_type("p5.48xlarge").max_efa_interfaces
    assert (p5[0]["NetworkCardIndex"], p5[0]["DeviceIndex"], p5[0].get("InterfaceType")) == (0, 0, None)
    efa_only = p5[1:]
    assert len(efa_only) == cards and {n["InterfaceType"] for n in efa_only} == {"efa-only"}
    assert (efa_only[0]["NetworkCardIndex"], efa_only[0]["DeviceIndex"]) == (0, 1)
    assert all(n["DeviceIndex"] == 0 for n in efa_only[1:])


def test_each_type_launches_from_its_layouts_template_in_preference_order(efa_mixed: Template) -> None:
    policy = _group(efa_mixed)["MixedInstancesPolicy"]
    overrides = policy["LaunchTemplate"]["Overrides"]
    assert [o["InstanceType"] for o in overrides] == ["p5.48xlarge", "p4d.24xlarge"]
    assert [o["LaunchTemplateSpecification"]["LaunchTemplateId"]["Ref"][:18] for o in overrides] == [
        "FleetTemplateEfaOn", "FleetTemplateEfa4T",
    ]  # fmt: skip
    distribution = policy["InstancesDistribution"]
    assert distribution["OnDemandPercentageAboveBaseCapacity"] == 50
    assert _group(efa_mixed)["CapacityRebalance"] is True


def test_launches_wait_for_the_node_and_are_abandoned_on_timeout(efa_mixed: Template) -> None:
    hooks = {h["LifecycleTransition"]: h for h in _group(efa_mixed)["LifecycleHookSpecificationList"]}
    launch, terminate = hooks["autoscaling:EC2_INSTANCE_LAUNCHING"], hooks["autoscaling:EC2_INSTANCE_TERMINATING"]
    assert (launch["LifecycleHookName"], launch["DefaultResult"]) == (f"{GROUP}-launch-hold", "ABANDON")
    # A training fleet at its default DCGM level: the bootstrap's worst case plus that level's diagnostic.
    assert launch["HeartbeatTimeout"] == BOOTSTRAP_SECONDS + DCGM_LEVEL_SECONDS[DEFAULT_DCGM_LEVEL["training"]]
    assert (terminate["LifecycleHookName"], terminate["DefaultResult"]) == (f"{GROUP}-terminate-hold", "CONTINUE")
    assert terminate["HeartbeatTimeout"] == TERMINATE_HOOK_TIMEOUT.to_seconds()


def test_efa_fleet_is_placed_in_a_cluster_and_prefers_reservations(efa_mixed: Template) -> None:
    placement_id, _ = only(efa_mixed, "AWS::EC2::PlacementGroup")
    efa_mixed.has_resource_properties("AWS::EC2::PlacementGroup", {"Strategy": "cluster"})
    group = _group(efa_mixed)
    assert group["PlacementGroup"] == {"Ref": placement_id}
    assert group["CapacityReservationSpecification"] == {"CapacityReservationPreference": "capacity-reservations-first"}


def test_capacity_block_fleet_is_empty_outside_its_window() -> None:
    block = CapacityBlock(
        id="cr-0fedcba9876543210",
        start=datetime(2026, 12, 1, 11, 30, tzinfo=UTC),
        end=datetime(2026, 12, 3, 11, 30, tzinfo=UTC),
    )
    tmpl = _build(name="block", role="training", instance_types=["p5.48xlarge"], efa=True,
                  availability_zones=["us-east-1a"], capacity=Capacity(min=2, max=2),
                  on_demand_percentage_above_base=100, capacity_block=block)  # fmt: skip
    group = _group(tmpl)
    assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == ("0", "0", "0")
    assert "MixedInstancesPolicy" not in group
    actions = {
        a["Properties"]["StartTime"]: a["Properties"]
        for a in tmpl.find_resources("AWS::AutoScaling::ScheduledAction").values()
    }
    assert actions["2026-12-01T11:35:00Z"]["DesiredCapacity"] == 2  # five minutes into the block
    assert actions["2026-12-03T10:30:00Z"]["DesiredCapacity"] == 0  # an hour before EC2 reclaims it
    _, launch_template = only(tmpl, "AWS::EC2::LaunchTemplate")
    data = launch_template["Properties"]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "cr-0fedcba9876543210"
    }
    assert data["InstanceType"] == "p5.48xlarge"


def test_inference_fleet_tracks_gpu_utilization_of_its_group() -> None:
    tmpl = _build(
        capacity=Capacity(min=1, max=4), scaling=Scaling(target_tracking=TargetTracking(gpu_utilization_percent=60))
    )
    _, policy = only(tmpl, "AWS::AutoScaling::ScalingPolicy")
    config = policy["Properties"]["TargetTrackingConfiguration"]
    assert config["TargetValue"] == 60
    metric = config["CustomizedMetricSpecification"]
    assert metric["Namespace"] == "GpuPlatform/dev"
    assert metric["Dimensions"] == [{"Name": "AutoScalingGroupName", "Value": GROUP}]
    tmpl.resource_count_is("AWS::EC2::PlacementGroup", 0)
