"""A second, small synth: the dev environment with fleets that the shipped configs do not have.

It covers EFA layouts the shipped configs lack (p5 next to p4d, g4dn.12xlarge), a
Capacity Block fleet, a warm pool, and refresh settings other than the defaults (one
fleet tuned, one not rolled). Synthesized once per run by the ``fleet_synth`` fixture of
tests/conftest.py; the fleets stack's groups, launch templates and user data as the tests read them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app import add_platform
from config import load_environment
from config.naming import ResourceNames
from stacks.compliance import platform_app
from tests.synth import TEST_CONFIG_DIR, StackTemplate, Synth, build_once, collect_stacks, synth_context

EXTRA_FLEETS = [
    {
        "name": "mixed-efa",
        "role": "training",
        "instance_types": ["p5.48xlarge", "p4d.24xlarge"],
        "efa": True,
        "placement": "cluster",
        "availability_zones": ["us-east-1a"],
        "capacity": {"min": 0, "max": 4},
        "on_demand_base_capacity": 0,
        "on_demand_percentage_above_base": 50,
        "spot_allocation_strategy": "capacity-optimized",
        "capacity_reservation": {"preference": "capacity-reservations-only", "ids": ["cr-0123456789abcdef0"]},
    },
    {
        "name": "g4dn-efa",
        "role": "training",
        "instance_types": ["g4dn.12xlarge"],
        "efa": True,
        "placement": "cluster",
        "availability_zones": ["us-east-1a"],
        "capacity": {"min": 0, "max": 2},
        "refresh": {
            "min_healthy_percentage": 50,
            "instance_warmup_minutes": 20,
            "checkpoint_percentages": [25, 100],
            "checkpoint_delay_minutes": 30,
            "auto_rollback": False,
            "rollback_alarms": ["health-check-failed", "capacity-shortfall"],
        },
    },
    {
        "name": "warm",
        "role": "inference",
        "instance_types": ["g5.xlarge"],
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "capacity": {"min": 1, "max": 4, "desired": 1},  # target tracking cannot scale out from 0
        "on_demand_percentage_above_base": 100,
        "warm_pool": {"min_size": 1, "max_prepared_capacity": 6},
        "scaling": {"target_tracking": {"gpu_utilization_percent": 60}},
        "refresh": {"enabled": False},
    },
    {
        "name": "block",
        "role": "training",
        "instance_types": ["p5.48xlarge"],
        "efa": True,
        "placement": "none",
        "availability_zones": ["us-east-1a"],
        "capacity": {"min": 2, "max": 2},
        "on_demand_percentage_above_base": 100,
        "capacity_block": {
            "id": "cr-0fedcba9876543210",
            "start": "2026-12-01T11:30:00Z",
            "end": "2026-12-03T11:30:00Z",
        },
    },
]


def synthesize_fleets(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The test dev config with ``EXTRA_FLEETS`` added, synthesized once per run (``build_once``)."""
    config_dir = tmp_path_factory.mktemp("config")
    data = yaml.safe_load((TEST_CONFIG_DIR / "dev.yaml").read_text())
    data["fleets"] = data["fleets"] + EXTRA_FLEETS
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    env = load_environment("dev", config_dir)

    def build(outdir: Path) -> None:
        add_platform(platform_app(context=synth_context(), outdir=str(outdir)), [env]).synth()

    return collect_stacks(build_once(pytestconfig, tmp_path_factory, "fleet-cdk.out", build), [env])


def fleets_stack(synth: Synth, env: str = "dev") -> StackTemplate:
    return synth.stack(env, "Fleets")


def asg_name(stack: StackTemplate, fleet: str) -> str:
    """The group's name in full: a suffix would also match a fleet whose name ends in ``-<fleet>``."""
    return ResourceNames(env=stack.env, account="", region="").asg_name(fleet)


def group(stack: StackTemplate, fleet: str) -> dict:
    """The properties of the fleet's Auto Scaling group."""
    (found,) = [
        v["Properties"]
        for v in stack.resources("AWS::AutoScaling::AutoScalingGroup").values()
        if v["Properties"]["AutoScalingGroupName"] == asg_name(stack, fleet)
    ]
    return found


def group_id(stack: StackTemplate, fleet: str) -> str:
    """The logical id of the fleet's Auto Scaling group."""
    (logical_id,) = [
        k
        for k, v in stack.resources("AWS::AutoScaling::AutoScalingGroup").items()
        if v["Properties"]["AutoScalingGroupName"] == asg_name(stack, fleet)
    ]
    return logical_id


def of_group(stack: StackTemplate, kind: str, fleet: str) -> list[dict]:
    """The properties of each resource of ``kind`` that names the fleet's group."""
    ref = {"Ref": group_id(stack, fleet)}
    return [
        v["Properties"] for v in stack.resources(kind).values() if v["Properties"].get("AutoScalingGroupName") == ref
    ]


def templates(stack: StackTemplate, fleet: str) -> dict[str, dict]:
    """The fleet's launch templates' data, by logical id."""
    return {
        k: v["Properties"]["LaunchTemplateData"]
        for k, v in stack.resources("AWS::EC2::LaunchTemplate").items()
        if k.startswith(f"Fleet{fleet.replace('-', '')}Template")
    }


def user_data(data: dict) -> str:
    """A launch template's user data as text, each token as ``<token>``."""
    parts = data["UserData"]["Fn::Base64"]
    if isinstance(parts, str):
        return parts
    return "".join(p if isinstance(p, str) else "<token>" for p in parts["Fn::Join"][1])
