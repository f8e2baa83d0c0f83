"""Slurm on AWS PCS in the config: every mistake is one exact line (file, field, value, fix), PCS's limits
included; the limits themselves are checked against the sources they come from (PCS's API model in botocore,
the CloudFormation registry schemas in cfn-lint); a fleet's capacity splits into one node group per purchase
option."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import botocore
import pytest
import yaml
from cfnlint.helpers import REGIONS
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from config import load_environment
from config.fleets import Fleet, node_group_plans
from config.slurm import CLUSTER_SIZES, LATEST_SLURM_VERSION, PCS_REGIONS, SLURM_VERSIONS
from tests.config.helpers import load_error, write_env
from tests.synth import SLURM_DIR

BLOCK = {"id": "cr-0fedcba9876543210", "start": "2026-12-01T11:30:00Z", "end": "2026-12-03T11:30:00Z"}


def hpc() -> dict[str, Any]:
    """The Slurm test environment (tests/fixtures/config/slurm/hpc.yaml)."""
    return yaml.safe_load((SLURM_DIR / "hpc.yaml").read_text(encoding="utf-8"))


def slurm_fleet(**changes: Any) -> dict[str, Any]:
    """A valid Slurm training fleet of one p4d type in the Lustre zone, with ``changes`` applied."""
    base = {
        "name": "train",
        "role": "training",
        "scheduler": "slurm",
        "instance_types": ["p4d.24xlarge"],
        "efa": True,
        "placement": "cluster",
        "availability_zones": ["us-east-1a"],
        "capacity": {"min": 0, "max": 2},
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def errors(tmp_path: Path, data: dict[str, Any]) -> list[str]:
    write_env(tmp_path, "hpc", data)
    return load_error("hpc", tmp_path)


def with_fleets(*fleets: dict[str, Any]) -> dict[str, Any]:
    data = hpc()
    data["fleets"] = list(fleets)
    return data


FLEET_CASES = [
    pytest.param(
        slurm_fleet(role="inference", efa=False, placement="none"),
        "hpc.yaml: fleets[0].scheduler: slurm queues training jobs and 'train' is a served or inference fleet (its "
        "nodes serve behind a load balancer, which PCS nodes do not join); fix: remove scheduler, or use it on a "
        "training fleet without service",
        id="inference-fleet",
    ),
    pytest.param(
        slurm_fleet(name="tr"),
        "hpc.yaml: fleets[0].name: 'tr' names the fleet's Slurm queue, and a PCS queue name has 3 to 25 characters; "
        "fix: give the fleet a name of 3 characters or more",
        id="queue-name",
    ),
    pytest.param(
        slurm_fleet(instance_types=["g6.xlarge", "g6.2xlarge"], efa=False, placement="none"),
        "hpc.yaml: fleets[0].instance_types[1]: g6.2xlarge has 8 vCPUs and g6.xlarge 4: a PCS compute node group "
        "takes instance types with the same vCPU count, architecture and EFA support; fix: list types of one size "
        "(e.g. only the first), or make a second Slurm fleet for the other size",
        id="instance-types-per-node-group",
    ),
    pytest.param(
        slurm_fleet(instance_types=["p5.48xlarge", "p5en.48xlarge"]),
        "hpc.yaml: fleets[0].instance_types[1]: p5en.48xlarge has another EFA interface layout than p5.48xlarge: "
        "the fleet's one launch template serves every type of its node groups; fix: list types of one layout",
        id="efa-layouts-per-node-group",
    ),
    pytest.param(
        slurm_fleet(placement="none", capacity_block=BLOCK),
        "hpc.yaml: fleets[0].capacity_block.instance_count: a Slurm fleet's Capacity Block node group may not "
        "exceed the block's size, which the config must give; fix: add instance_count: the block's number of "
        "instances",
        id="capacity-block-without-size",
    ),
    pytest.param(
        slurm_fleet(placement="none", capacity={"min": 0, "max": 4}, capacity_block={**BLOCK, "instance_count": 2}),
        "hpc.yaml: fleets[0].capacity.max: 4 is more than the Capacity Block's 2 instances (PCS refuses a node "
        "group larger than its block); fix: lower capacity.max to 2 or less",
        id="capacity-block-size-vs-max",
    ),
    pytest.param(
        slurm_fleet(capacity={"min": 0, "max": 2, "desired": 1}),
        "hpc.yaml: fleets[0].capacity.desired: PCS sizes a Slurm fleet between capacity.min and capacity.max by the "
        "jobs in its queue; fix: remove desired",
        id="desired",
    ),
    pytest.param(
        slurm_fleet(scaling={"schedules": [{"name": "on", "cron": "0 8 * * 1-5", "min": 1}]}),
        "hpc.yaml: fleets[0].scaling: a Slurm fleet has no Auto Scaling group for GPU-utilization policies and "
        "schedules: PCS starts nodes when jobs wait and stops them after slurm.scale_down_idle_seconds; fix: "
        "remove scaling",
        id="scaling",
    ),
    pytest.param(
        slurm_fleet(spot_allocation_strategy="capacity-optimized-prioritized"),
        "hpc.yaml: fleets[0].spot_allocation_strategy: capacity-optimized-prioritized is not one PCS takes; fix: "
        "use one of lowest-price, capacity-optimized, price-capacity-optimized",
        id="spot-strategy",
    ),
    pytest.param(
        slurm_fleet(
            on_demand_percentage_above_base=100,
            capacity_reservation={
                "preference": "capacity-reservations-first",
                "ids": ["cr-0123456789abcdef0", "cr-0123456789abcdef1"],
            },
        ),
        "hpc.yaml: fleets[0].capacity_reservation: a Slurm fleet's On-Demand node group targets one reservation or "
        "one reservation group (its launch template takes one); fix: put the reservations in a resource group and "
        "give its ARN as the only entry of resource_group_arns",
        id="two-reservations",
    ),
]


@pytest.mark.parametrize(("fleet", "expected"), FLEET_CASES)
def test_a_slurm_fleet_pcs_cannot_take_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet: dict[str, Any], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert errors(tmp_path, with_fleets(fleet)) == [expected]


def _region(data: dict[str, Any], region: str) -> dict[str, Any]:
    """``data`` moved to ``region`` (its zones with it)."""
    return yaml.safe_load(yaml.safe_dump(data).replace("us-east-1", region))


def _people(**slurm: Any) -> dict[str, Any]:
    data = hpc()
    data["slurm"].update(slurm)
    return data


ENVIRONMENT_CASES = [
    pytest.param(
        {k: v for k, v in hpc().items() if k != "slurm"},
        [
            "hpc.yaml: fleets[0].scheduler: slurm needs the environment's PCS cluster and hpc has no slurm section; "
            "fix: add 'slurm: {}' (a small cluster of the newest Slurm PCS offers, accounting on) or remove scheduler"
        ],
        id="slurm-fleet-without-slurm-section",
    ),
    pytest.param(
        {**hpc(), "fleets": [f for f in hpc()["fleets"] if "scheduler" not in f]},
        [
            "hpc.yaml: slurm: no fleet sets scheduler: slurm, and a PCS cluster with no queue would run (and cost) "
            "for nothing; fix: set scheduler: slurm on a training fleet, or remove the slurm section"
        ],
        id="slurm-section-without-slurm-fleet",
    ),
    pytest.param(
        _region(hpc(), "il-central-1"),
        [
            "hpc.yaml: slurm: AWS Parallel Computing Service does not run in il-central-1; fix: deploy the "
            "environment to a region where it runs (e.g. us-east-1, us-west-2, eu-west-1) or remove slurm and the "
            "fleets' scheduler: slurm"
        ],
        id="region-without-pcs",
    ),
    pytest.param(
        _people(slurm_version="24.05"),
        [
            "hpc.yaml: slurm.slurm_version: '24.05' is not a Slurm version AWS PCS offers; fix: use one of 24.11, "
            f"25.05, 25.11, 26.05 (the newest, {LATEST_SLURM_VERSION}, when left out)"
        ],
        id="slurm-version-not-offered",
    ),
    pytest.param(
        _people(slurm_version=25.11),
        [
            "hpc.yaml: slurm.slurm_version: 25.11 is read by YAML as a number; fix: quote the version, e.g. "
            f'slurm_version: "{LATEST_SLURM_VERSION}"'
        ],
        id="slurm-version-unquoted",
    ),
    pytest.param(
        _people(login={"instance_type": "m7i.large", "count": 1}, cluster_size="small")
        | {"fleets": [slurm_fleet(capacity={"min": 0, "max": 32})]},
        [
            "hpc.yaml: slurm.cluster_size: small manages at most 32 nodes and the Slurm fleets' capacity.max and the "
            "login nodes add up to 33; fix: choose a larger cluster_size (medium: 512, large: 2048) or lower "
            "capacity.max"
        ],
        id="cluster-size",
    ),
    pytest.param(
        _people(users=[{"name": "carol", "uid": 20003, "team": "robotics"}]),
        [
            "hpc.yaml: slurm.users[0].team: 'robotics' is not a team of this cluster (vision, nlp); fix: add it to "
            "teams or use one of them"
        ],
        id="unknown-team",
    ),
    pytest.param(
        _people(
            users=[{"name": "alice", "uid": 20001, "team": "vision"}, {"name": "bob", "uid": 20001, "team": "nlp"}]
        ),
        ["hpc.yaml: slurm.users[1].uid: 20001 is the uid of users[0] too; fix: give each person their own uid"],
        id="shared-uid",
    ),
    pytest.param(
        _people(users=[{"name": "Alice", "uid": 20001, "team": "vision"}]),
        [
            "hpc.yaml: slurm.users[0].name: 'Alice' is not a POSIX user name; fix: 1-32 lowercase letters, digits, "
            "'_' and '-', starting with a letter or '_'"
        ],
        id="posix-name",
    ),
]


@pytest.mark.parametrize(("data", "expected"), ENVIRONMENT_CASES)
def test_a_slurm_environment_mistake_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: dict[str, Any], expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert errors(tmp_path, copy.deepcopy(data)) == expected


def test_the_slurm_defaults_are_the_newest_version_a_small_cluster_and_accounting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = hpc()
    data["slurm"] = {}
    write_env(tmp_path, "hpc", data)
    slurm = load_environment("hpc", tmp_path).slurm
    assert slurm is not None
    assert (slurm.slurm_version, slurm.cluster_size.value, slurm.accounting) == (SLURM_VERSIONS[-1], "small", True)
    assert (slurm.scale_down_idle_seconds, slurm.login.count) == (600, 1)


def test_the_slurm_versions_are_those_pcs_offers() -> None:
    """PCS's API model (botocore) lists the versions ``CreateCluster`` takes; all of them are 24.11 or newer."""
    path = Path(botocore.__file__).parent / "data" / "pcs" / "2023-02-10" / "service-2.json.gz"
    model = json.loads(gzip.decompress(path.read_bytes()))
    text = re.sub("<[^>]+>", "", model["shapes"]["SchedulerRequest"]["members"]["version"]["documentation"])
    offered = re.search(r"Valid Values:\s*([0-9. |]+)", text)
    assert offered is not None
    assert tuple(v.strip() for v in offered.group(1).split("|") if v.strip()) == SLURM_VERSIONS
    assert min(tuple(map(int, v.split("."))) for v in SLURM_VERSIONS) >= (24, 11)
    size = re.sub("<[^>]+>", "", model["shapes"]["CreateClusterRequest"]["members"]["size"]["documentation"])
    for name, (nodes, jobs) in CLUSTER_SIZES.items():
        assert f"{name.value.upper()}: {nodes} compute nodes and {jobs} jobs" in size.replace(",", "")


def _has_pcs_cluster(region: str) -> bool:
    try:
        PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, "AWS::PCS::Cluster")
    except Exception:  # cfn-lint raises its own not-found error: the region has no such type
        return False
    return True


def test_the_pcs_regions_are_those_where_cloudformation_has_a_pcs_cluster() -> None:
    have = [region for region in REGIONS if _has_pcs_cluster(region)]
    assert sorted(PCS_REGIONS) == sorted(have)
    assert "us-east-1" in PCS_REGIONS and "il-central-1" not in PCS_REGIONS


def _fleet(**values: Any) -> Fleet:
    base = {
        "name": "train",
        "role": "training",
        "scheduler": "slurm",
        "instance_types": ["g6.xlarge"],
        "availability_zones": ["us-east-1a"],
        "capacity": {"min": 0, "max": 8},
    }
    return Fleet(**{**base, **values})


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param({}, [("SPOT", 0, 8)], id="all-spot"),
        pytest.param({"on_demand_percentage_above_base": 100}, [("ONDEMAND", 0, 8)], id="all-on-demand"),
        pytest.param(
            {"on_demand_base_capacity": 2, "on_demand_percentage_above_base": 50, "capacity": {"min": 3, "max": 8}},
            [("ONDEMAND", 3, 5), ("SPOT", 0, 3)],
            id="base-and-half",
        ),
        pytest.param(
            {"capacity": {"min": 0, "max": 0}, "on_demand_percentage_above_base": 100},
            [("ONDEMAND", 0, 0)],
            id="held-at-zero",
        ),
        pytest.param(
            {
                "instance_types": ["p5.48xlarge"],
                "capacity": {"min": 0, "max": 2},
                "capacity_block": {**BLOCK, "instance_count": 2},
            },
            [("CAPACITY_BLOCK", 0, 2)],
            id="capacity-block",
        ),
    ],
)
def test_a_fleets_capacity_splits_into_one_node_group_per_purchase_option(
    values: dict[str, Any], expected: list[tuple[str, int, int]]
) -> None:
    plans = node_group_plans(_fleet(**values))
    assert [(p.purchase.value, p.min, p.max) for p in plans] == expected
    assert sum(p.max for p in plans) == _fleet(**values).capacity.max


def test_a_slurm_fleet_is_not_rolled_by_instance_refresh() -> None:
    assert _fleet().rollout is None


def test_the_test_slurm_environment_is_valid() -> None:
    env = load_environment("hpc", SLURM_DIR)
    assert [f.name for f in env.slurm_fleets] == ["training", "block", "small"]
