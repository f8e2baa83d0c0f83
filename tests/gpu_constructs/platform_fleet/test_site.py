"""FleetSite and the fleet stack's typed inputs: what every fleet of an environment shares."""

from __future__ import annotations

import pytest

from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from gpu_constructs.platform_fleet.site import NodeNetwork
from stacks.platform_stage import PlatformStage


def test_every_launch_waits_for_the_scripts_read_policy_and_each_node_log_group(stage: PlatformStage) -> None:
    site = stage.fleets.site
    after = site.launch_after
    assert after[0] is site.scripts.read_policy
    assert after[1:] == list(site.security.node_log_groups.values())
    assert sorted(site.security.node_log_groups) == sorted(NODE_LOGS)


def test_the_inputs_come_from_the_network_and_security_stacks(stage: PlatformStage) -> None:
    site = stage.fleets.site
    assert site.network.vpc is stage.network.vpc
    assert site.network.node is stage.network.node_security_group
    assert site.network.training is stage.network.training_security_group is not None
    assert site.security.node_role is stage.security.node_role.role
    assert site.security.slurm_profiles is stage.security.slurm_profiles is not None
    assert site.node_site.names == site.names


def test_only_a_training_fleet_gets_the_training_group(stage: PlatformStage) -> None:
    network = stage.fleets.site.network
    for fleet in stage.fleets.site.env.fleets:
        group = network.training_group(fleet)
        assert (group is network.training) if fleet.role.value == "training" else group is None


def test_a_training_fleet_without_a_training_group_is_a_wiring_mistake(stage: PlatformStage) -> None:
    network = stage.fleets.site.network
    bare = NodeNetwork(network.vpc, network.node, network.efa, None)
    fleet = next(f for f in stage.fleets.site.env.fleets if f.role.value == "training")
    with pytest.raises(ValueError, match=f"fleet {fleet.name} trains but the network has no training security group"):
        bare.training_group(fleet)


def test_subnets_are_the_gpu_subnets_of_the_fleets_zones(stage: PlatformStage) -> None:
    network = stage.fleets.site.network
    for fleet in stage.fleets.site.env.fleets:
        chosen = network.vpc.select_subnets(**network.subnets(fleet)._values)
        assert sorted(s.availability_zone for s in chosen.subnets) == sorted(fleet.availability_zones)
        assert network.subnet_ids(list(fleet.availability_zones)) == chosen.subnet_ids
