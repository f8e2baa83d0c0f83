"""A Slurm fleet on PCS: its queue over its own node groups, one node group per purchase option, its launch
template as PCS asks for it, its reservation on the On-Demand group only, the scheduler in its node.env."""

from __future__ import annotations

import pytest

from config.fleets import CapacityReservation, node_group_plans
from gpu_constructs.scheduler.slurm_fleet import reservation_specification
from tests.gpu_constructs.scheduler.helpers import ENV, by_path, logical_id, user_data_text
from tests.synth import StackTemplate, Synth


def test_each_slurm_fleet_has_its_queue_over_its_own_node_groups_and_the_login_nodes_none(
    slurm_synth: Synth, fleets: StackTemplate
) -> None:
    env = slurm_synth.environments[ENV]
    queues = {q["Properties"]["Name"]: q for q in fleets.resources("AWS::PCS::Queue").values()}
    assert sorted(queues) == sorted(f.name for f in env.slurm_fleets)
    queued: set[str] = set()
    for name, queue in queues.items():
        members = {
            c["ComputeNodeGroupId"]["Fn::GetAtt"][0] for c in queue["Properties"]["ComputeNodeGroupConfigurations"]
        }
        assert members == set(by_path(fleets, "AWS::PCS::ComputeNodeGroup", f"/Fleet-{name}/"))
        queued |= members
    login = by_path(fleets, "AWS::PCS::ComputeNodeGroup", "/Slurm/Login/")
    assert len(login) == 1 and not set(login) & queued


def test_node_groups_split_the_fleet_by_purchase_option(slurm_synth: Synth, fleets: StackTemplate) -> None:
    for fleet in slurm_synth.environments[ENV].slurm_fleets:
        groups = by_path(fleets, "AWS::PCS::ComputeNodeGroup", f"/Fleet-{fleet.name}/").values()
        got = sorted(
            (
                g["Properties"]["PurchaseOption"],
                g["Properties"]["ScalingConfiguration"]["MinInstanceCount"],
                g["Properties"]["ScalingConfiguration"]["MaxInstanceCount"],
            )
            for g in groups
        )
        assert got == sorted((p.purchase.value, p.min, p.max) for p in node_group_plans(fleet)), fleet.name
        assert sum(g[2] for g in got) == fleet.capacity.max
        for group in groups:
            props = group["Properties"]
            assert [c["InstanceType"] for c in props["InstanceConfigs"]] == fleet.instance_types
            spot = props["PurchaseOption"] == "SPOT"
            assert ("SpotOptions" in props) is spot
            if spot:
                assert props["SpotOptions"]["AllocationStrategy"] == fleet.spot_allocation_strategy.value
    purchases = {
        name: sorted(
            g["Properties"]["PurchaseOption"]
            for g in by_path(fleets, "AWS::PCS::ComputeNodeGroup", f"/Fleet-{name}/").values()
        )
        for name in ("training", "block", "small")
    }
    assert purchases == {"training": ["ONDEMAND", "SPOT"], "block": ["CAPACITY_BLOCK"], "small": ["SPOT"]}


def test_slurm_launch_templates_follow_what_pcs_asks(slurm_synth: Synth, fleets: StackTemplate) -> None:
    """No instance profile (the node group's is used), MIME multi-part user data, IMDSv2 only, the Slurm nodes'
    group on every interface, the placement group in the template, an instance type only for a Capacity Block."""
    ((slurm_nodes, _),) = by_path(fleets, "AWS::EC2::SecurityGroup", "/Slurm/SecurityGroups/Nodes/").items()
    env = slurm_synth.environments[ENV]
    for fleet in [*env.slurm_fleets, None]:
        path = f"/Fleet-{fleet.name}/" if fleet else "/Slurm/Login/"
        for lid, template in by_path(fleets, "AWS::EC2::LaunchTemplate", path).items():
            data = template["Properties"]["LaunchTemplateData"]
            assert "IamInstanceProfile" not in data, lid
            assert user_data_text(template).startswith("Content-Type: multipart/mixed; boundary="), lid
            assert data["MetadataOptions"]["HttpTokens"] == "required"
            groups = [g for nic in data.get("NetworkInterfaces", []) for g in nic.get("Groups", [])]
            groups += data.get("SecurityGroupIds", [])
            assert {"Fn::GetAtt": [slurm_nodes, "GroupId"]} in groups, lid
            if fleet is None:
                continue
            assert ("InstanceType" in data) is (fleet.capacity_block is not None), lid
            assert ("Placement" in data) is (fleet.placement.value != "none"), lid
            if fleet.capacity_block is not None:
                assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
                assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
                    "CapacityReservationId": fleet.capacity_block.id
                }


def test_the_on_demand_group_of_a_reserved_fleet_launches_into_the_reservation(fleets: StackTemplate) -> None:
    """training: capacity-reservations-first without targets is ``open``, on the On-Demand group's template only."""
    templates = fleets.resources("AWS::EC2::LaunchTemplate")
    for group in by_path(fleets, "AWS::PCS::ComputeNodeGroup", "/Fleet-training/").values():
        data = templates[logical_id(group["Properties"]["CustomLaunchTemplate"]["TemplateId"])]["Properties"]
        spec = data["LaunchTemplateData"].get("CapacityReservationSpecification")
        on_demand = group["Properties"]["PurchaseOption"] == "ONDEMAND"
        assert spec == ({"CapacityReservationPreference": "open"} if on_demand else None)


def test_the_user_data_tells_a_slurm_node_its_scheduler(fleets: StackTemplate) -> None:
    (template,) = by_path(fleets, "AWS::EC2::LaunchTemplate", "/Fleet-small/").values()
    parts = template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
    (inner,) = [p["Fn::Base64"] for p in parts if isinstance(p, dict) and "Fn::Base64" in p]
    script = "".join(s for s in inner["Fn::Join"][1] if isinstance(s, str))
    assert "\nSCHEDULER=slurm\n" in script


@pytest.mark.parametrize(
    ("reservation", "expected"),
    [
        pytest.param(None, None, id="none"),
        pytest.param({"preference": "default"}, None, id="default"),
        pytest.param({"preference": "none"}, {"CapacityReservationPreference": "none"}, id="avoid"),
        pytest.param(
            {"preference": "capacity-reservations-first"}, {"CapacityReservationPreference": "open"}, id="open"
        ),
        pytest.param(
            {"preference": "capacity-reservations-first", "ids": ["cr-0123456789abcdef0"]},
            {"CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}},
            id="one-id",
        ),
        pytest.param(
            {"preference": "capacity-reservations-only", "resource_group_arns": ["arn:aws:resource-groups:g"]},
            {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": "arn:aws:resource-groups:g"}},
            id="group",
        ),
    ],
)
def test_a_reservation_becomes_one_launch_template_option(reservation: dict | None, expected: dict | None) -> None:
    config = CapacityReservation(**reservation) if reservation else None
    assert reservation_specification(config) == expected
