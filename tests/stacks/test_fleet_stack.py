"""Launch templates and Auto Scaling groups of the GPU fleets."""

from __future__ import annotations

import base64
import json

import pytest

from config.naming import ResourceNames
from gpu_constructs.fleet.render.user_data import USER_DATA_LIMIT_BYTES
from tests.fleet_synth import fleets_stack
from tests.fleet_synth import group as _group
from tests.fleet_synth import templates as _templates
from tests.fleet_synth import user_data as _user_data
from tests.synth import Synth


def _efa(data: dict) -> list[dict]:
    """The interfaces that carry an EFA device (EFA with ENA, or EFA-only)."""
    return [n for n in data.get("NetworkInterfaces", []) if n.get("InterfaceType") in ("efa", "efa-only")]


def test_p4d_template_has_four_efa_interfaces_on_cards_0_to_3(synth: Synth) -> None:
    (data,) = _templates(fleets_stack(synth, "prod"), "training").values()
    efa = _efa(data)
    assert [(n["NetworkCardIndex"], n["DeviceIndex"]) for n in efa] == [(0, 0), (1, 1), (2, 1), (3, 1)]
    assert {n["InterfaceType"] for n in efa} == {"efa"}  # p4d keeps EFA-with-ENA interfaces
    for nic in efa:
        assert "AssociatePublicIpAddress" not in nic  # refused with several interfaces; the subnets map none
        outputs = [g["Fn::GetStackOutput"]["OutputName"] for g in nic["Groups"]]
        assert any("EfaSecurityGroup" in o for o in outputs) and any("NodesSecurityGroup" in o for o in outputs)
    assert "SecurityGroupIds" not in data  # groups sit on the interfaces


@pytest.mark.parametrize(("fleet", "cards"), [("mixed-efa", 32), ("block", 32)])
def test_p5_templates_have_an_ena_primary_and_efa_only_interfaces(fleet_synth: Synth, fleet: str, cards: int) -> None:
    (data,) = [d for d in _templates(fleets_stack(fleet_synth), fleet).values() if len(_efa(d)) == cards]
    nics = data["NetworkInterfaces"]
    primary, *rest = nics
    assert (primary["NetworkCardIndex"], primary["DeviceIndex"]) == (0, 0)
    assert "InterfaceType" not in primary  # a plain ENA interface: an EFA-only one cannot be primary
    assert [(n["NetworkCardIndex"], n["DeviceIndex"], n["InterfaceType"]) for n in rest] == [(0, 1, "efa-only")] + [
        (card, 0, "efa-only") for card in range(1, cards)
    ]
    for nic in nics:
        assert "AssociatePublicIpAddress" not in nic
        outputs = [g["Fn::GetStackOutput"]["OutputName"] for g in nic["Groups"]]
        assert any("EfaSecurityGroup" in o for o in outputs) and any("NodesSecurityGroup" in o for o in outputs)


def test_g4dn_12xlarge_template_has_one_efa_interface(fleet_synth: Synth) -> None:
    (data,) = _templates(fleets_stack(fleet_synth), "g4dn-efa").values()
    assert [(n["NetworkCardIndex"], n["DeviceIndex"]) for n in _efa(data)] == [(0, 0)]


def test_mixed_layouts_get_one_template_per_layout_and_per_override_templates(fleet_synth: Synth) -> None:
    stack = fleets_stack(fleet_synth)
    templates = _templates(stack, "mixed-efa")
    counts = sorted(len(_efa(d)) for d in templates.values())
    assert counts == [4, 32]
    p5 = next(d for d in templates.values() if len(_efa(d)) == 32)
    assert [n["NetworkCardIndex"] for n in _efa(p5)] == list(range(32))
    overrides = _group(stack, "mixed-efa")["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]
    assert [o["InstanceType"] for o in overrides] == ["p5.48xlarge", "p4d.24xlarge"]  # preference order kept
    by_type = {o["InstanceType"]: o["LaunchTemplateSpecification"]["LaunchTemplateId"]["Ref"] for o in overrides}
    assert len(_efa(templates[by_type["p5.48xlarge"]])) == 32
    assert len(_efa(templates[by_type["p4d.24xlarge"]])) == 4


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_non_efa_fleets_have_no_efa_interface(synth: Synth, env: str) -> None:
    stack = fleets_stack(synth, env)
    for fleet in synth.environments[env].fleets:
        if not fleet.efa:
            for data in _templates(stack, fleet.name).values():
                assert _efa(data) == []
                assert [n["DeviceIndex"] for n in data["NetworkInterfaces"]] == [0]
                assert data["NetworkInterfaces"][0]["AssociatePublicIpAddress"] is False


def _all_templates(synths: list[Synth]) -> list[tuple[str, dict]]:
    return [
        (f"{s.env}/{k}", v["Properties"]["LaunchTemplateData"])
        for synth in synths
        for s in synth.stacks.values()
        for k, v in s.resources("AWS::EC2::LaunchTemplate").items()
    ]


def test_imdsv2_encryption_no_key_pair_no_public_ip_on_every_template(synth: Synth, fleet_synth: Synth) -> None:
    templates = _all_templates([synth, fleet_synth])
    assert len(templates) >= 8
    for name, data in templates:
        meta = data["MetadataOptions"]
        assert meta["HttpTokens"] == "required", name
        assert meta["HttpEndpoint"] == "enabled", name
        assert meta["HttpPutResponseHopLimit"] in (1, 2), name
        assert "KeyName" not in data, name
        for device in data["BlockDeviceMappings"]:
            assert device["Ebs"]["Encrypted"] is True, name
            assert device["Ebs"]["VolumeType"] == "gp3", name
            assert "KeysDataA2F7C5E6" in json.dumps(device["Ebs"]["KmsKeyId"]), name  # the data key
        nics = data["NetworkInterfaces"]
        for nic in nics:
            if len(nics) > 1:
                assert "AssociatePublicIpAddress" not in nic, name
            else:
                assert nic.get("AssociatePublicIpAddress", False) is False, name
        assert "IamInstanceProfile" in data, name


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_hop_limit_follows_containers_and_volumes_follow_config(synth: Synth, env: str) -> None:
    stack = fleets_stack(synth, env)
    for fleet in synth.environments[env].fleets:
        for data in _templates(stack, fleet.name).values():
            assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == (2 if fleet.containers else 1)
            sizes = {d["DeviceName"]: d["Ebs"]["VolumeSize"] for d in data["BlockDeviceMappings"]}
            expected = {"/dev/sda1": fleet.root_volume_gib}
            if fleet.scratch_volume_gib:
                expected["/dev/sdb"] = fleet.scratch_volume_gib
            assert sizes == expected


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_group_distribution_equals_config(synth: Synth, env: str) -> None:
    stack = fleets_stack(synth, env)
    names = ResourceNames.of(synth.environments[env])
    for fleet in synth.environments[env].fleets:
        group = _group(stack, fleet.name)
        assert group["AutoScalingGroupName"] == names.asg_name(fleet.name)
        assert (int(group["MinSize"]), int(group["MaxSize"])) == (fleet.capacity.min, fleet.capacity.max)
        if fleet.capacity.desired is not None:
            assert int(group["DesiredCapacity"]) == fleet.capacity.desired
        dist = group["MixedInstancesPolicy"]["InstancesDistribution"]
        assert dist["OnDemandBaseCapacity"] == fleet.on_demand_base_capacity
        assert dist["OnDemandPercentageAboveBaseCapacity"] == fleet.on_demand_percentage_above_base
        assert dist["SpotAllocationStrategy"] == fleet.spot_allocation_strategy.value
        assert dist["OnDemandAllocationStrategy"] == "prioritized"
        overrides = group["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]
        assert [o["InstanceType"] for o in overrides] == fleet.instance_types
        assert group["CapacityRebalance"] is fleet.uses_spot
        zones = fleet.availability_zones
        assert len(group["VPCZoneIdentifier"]) == len(zones)
        notifications = group["NotificationConfigurations"][0]["NotificationTypes"]
        assert sorted(notifications) == sorted(
            f"autoscaling:EC2_INSTANCE_{e}" for e in ("LAUNCH", "LAUNCH_ERROR", "TERMINATE", "TERMINATE_ERROR")
        )


def test_defaults_per_environment(synth: Synth) -> None:
    dev = {f.name: f for f in synth.environments["dev"].fleets}["inference"]
    assert dev.role == "inference" and all(t.startswith("g4dn.") for t in dev.instance_types)
    assert dev.on_demand_percentage_above_base == 0 and dev.on_demand_base_capacity == 0  # mostly Spot
    prod = {f.name: f for f in synth.environments["prod"].fleets}
    training, inference = prod["training"], prod["inference"]
    assert training.instance_types == ["p4d.24xlarge"] and training.efa and training.placement == "cluster"
    assert training.on_demand_base_capacity > 0 and training.capacity_reservation is not None
    assert {t.split(".")[0] for t in inference.instance_types} == {"g5", "g4dn"}
    assert inference.on_demand_base_capacity > 0 and inference.on_demand_percentage_above_base == 0


def test_placement_group_only_where_configured_and_for_every_efa_fleet_without_a_capacity_block(
    synth: Synth, fleet_synth: Synth
) -> None:
    seen = efa_seen = 0
    for stack_synth in (synth, fleet_synth):
        for env, cfg in stack_synth.environments.items():
            stack = fleets_stack(stack_synth, env)
            groups = {k: v for k, v in stack.resources("AWS::EC2::PlacementGroup").items()}
            for fleet in cfg.fleets:
                group = _group(stack, fleet.name)
                wants = fleet.placement != "none"
                assert ("PlacementGroup" in group) is wants, fleet.name
                if fleet.efa and fleet.capacity_block is None:
                    assert wants, fleet.name  # the config requires cluster for them
                    efa_seen += 1
                if wants:
                    seen += 1
                    assert groups[group["PlacementGroup"]["Ref"]]["Properties"]["Strategy"] == fleet.placement
            assert len(groups) == sum(f.placement != "none" for f in cfg.fleets)
    assert efa_seen >= 4 and seen > efa_seen  # dev's training fleet: a cluster group without EFA


def test_capacity_reservation_targets(synth: Synth, fleet_synth: Synth) -> None:
    prod = _group(fleets_stack(synth, "prod"), "training")
    assert prod["CapacityReservationSpecification"] == {"CapacityReservationPreference": "capacity-reservations-first"}
    mixed = _group(fleets_stack(fleet_synth), "mixed-efa")
    assert mixed["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
    }
    assert "CapacityReservationSpecification" not in _group(fleets_stack(synth, "prod"), "inference")


def test_capacity_block_fleet(fleet_synth: Synth) -> None:
    stack = fleets_stack(fleet_synth)
    (data,) = _templates(stack, "block").values()
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0fedcba9876543210"}
    }
    assert len(_efa(data)) == 32
    group = _group(stack, "block")
    assert "MixedInstancesPolicy" not in group and "PlacementGroup" not in group
    assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == ("0", "0", "0")
    actions = sorted(
        (
            v["Properties"]
            for v in stack.resources("AWS::AutoScaling::ScheduledAction").values()
            if "StartTime" in v["Properties"]
        ),
        key=lambda p: p["StartTime"],
    )
    assert [(a["StartTime"], a["MinSize"], a["MaxSize"], a["DesiredCapacity"]) for a in actions] == [
        ("2026-12-01T11:35:00Z", 2, 2, 2),  # inside the block, min = max
        ("2026-12-03T10:30:00Z", 0, 0, 0),  # at zero before EC2 reclaims the block
    ]
    assert all("Recurrence" not in a for a in actions)


def test_user_data_fetches_scripts_and_runs_bootstrap_under_16kb(synth: Synth, fleet_synth: Synth) -> None:
    for name, data in _all_templates([synth, fleet_synth]):
        script = _user_data(data)
        # tokens resolve to at most a few hundred bytes each; leave room for them
        assert len(base64.b64encode(script.encode())) < USER_DATA_LIMIT_BYTES, name
        assert script.startswith("#!/bin/bash\nset -euo pipefail\n")
        assert '"$aws" s3 cp' in script and "python3 -m zipfile -e" in script
        # the abandon trap is set before anything can fail, the download retried inside it
        assert script.index("trap abandon EXIT") < script.index("\nfetch s3://")
        assert "--lifecycle-action-result ABANDON" in script
        assert script.rstrip().endswith('exec "$node/bootstrap.sh" 2>&3 3>&-')
        assert 'node="${GPU_PLATFORM_NODE_DIR:-/opt/gpu-platform/node}"' in script
        assert "LAUNCH_HOOK_NAME=gpu-platform-" in script and "FSX_DNS_NAME=<token>" in script


def test_efa_node_environment_from_catalog(synth: Synth) -> None:
    (data,) = _templates(fleets_stack(synth, "prod"), "training").values()
    script = _user_data(data)
    types = script.split("<<'INSTANCE_TYPES'\n", 1)[1].split("\nINSTANCE_TYPES", 1)[0]
    assert json.loads(types) == {"p4d.24xlarge": {"efa_interfaces": 4, "gpudirect_rdma": True, "gpus": 8}}
    assert "EFA_ENABLED=true" in script
    (dev,) = _templates(fleets_stack(synth, "dev"), "inference").values()
    dev_types = _user_data(dev).split("<<'INSTANCE_TYPES'\n", 1)[1].split("\nINSTANCE_TYPES", 1)[0]
    assert json.loads(dev_types)["g4dn.xlarge"] == {"efa_interfaces": 0, "gpudirect_rdma": False, "gpus": 1}


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_nodes_read_only_their_scripts_asset(synth: Synth, env: str) -> None:
    stack = fleets_stack(synth, env)
    (policy,) = [
        v["Properties"]
        for k, v in stack.resources("AWS::IAM::ManagedPolicy").items()
        if k.startswith("NodeScriptsRead")
    ]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == "s3:GetObject"
    resource = json.dumps(statement["Resource"])
    assert ".zip" in resource and "*" not in resource
    assert policy["Roles"][0]["Fn::GetStackOutput"]["StackName"] == f"{env}-Security"


def test_fleets_launch_from_the_platform_ami_parameter(synth: Synth) -> None:
    for env, cfg in synth.environments.items():
        stack = fleets_stack(synth, env)
        (param,) = (
            stack.json["Parameters"].values()
            if len(stack.json["Parameters"]) == 1
            else [p for k, p in stack.json["Parameters"].items() if k.startswith("SsmParameterValue")]
        )
        assert param["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
        assert param["Default"] == ResourceNames.of(cfg).ami_parameter
        # The Image stack seeds it (tests/flows/test_ami_parameter_seed.py) before the fleets resolve it.
        (seed,) = synth.stack(env, "Image").resources("Custom::AWS").values()
        assert ResourceNames.of(cfg).ami_parameter in json.dumps(seed["Properties"]["Create"])
        assert "Image" in str(synth.stack(env, "Fleets").manifest.get("dependencies", []))
