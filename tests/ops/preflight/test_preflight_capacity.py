"""Preflight capacity checks: instance types offered in the fleets' zones, EFA support (moto's EC2)."""

from __future__ import annotations

from ops.findings import Level
from ops.preflight.aws import Aws
from ops.preflight.capacity import check_efa, check_offerings
from tests.ops.preflight.preflight_fixtures import (
    environment,
    fleet_changed,
)


def test_types_offered_in_every_zone(aws: Aws) -> None:
    findings = check_offerings(environment("prod"), aws)
    assert [f.level for f in findings] == [Level.INFO, Level.INFO]
    assert "p4d.24xlarge offered in us-east-1a" in findings[0].message


def test_zone_offering_none_of_the_types_is_an_error(aws: Aws) -> None:
    # moto's us-east-1 offers p4d.24xlarge in a-d, not in us-east-1f.
    env = fleet_changed(environment("prod"), 0, availability_zones=["us-east-1f"])
    [finding, _] = check_offerings(env, aws)
    assert finding.level is Level.ERROR
    assert finding.message == "fleet training: us-east-1f offers none of p4d.24xlarge"


def test_zone_lacking_some_types_is_a_warning(aws: Aws) -> None:
    env = fleet_changed(environment("prod"), 0, instance_types=["p4d.24xlarge", "g4dn.xlarge"])
    env = fleet_changed(env, 0, availability_zones=["us-east-1d", "us-east-1f"])
    # us-east-1d offers both; us-east-1f offers g4dn.xlarge only.
    findings = [f for f in check_offerings(env, aws) if "training" in f.message]
    assert [(f.level, f.message) for f in findings] == [
        (Level.WARNING, "fleet training: us-east-1f does not offer p4d.24xlarge (the group launches the others there)")
    ]


def test_efa_types_support_efa(aws: Aws) -> None:
    [finding] = check_efa(environment("prod"), aws)
    assert finding.level is Level.INFO and finding.message == "fleet training: p4d.24xlarge supports EFA"


def test_efa_fleet_on_a_type_without_efa_is_an_error(aws: Aws) -> None:
    env = fleet_changed(environment("prod"), 0, instance_types=["g4dn.xlarge"])
    [finding] = check_efa(env, aws)
    assert finding.level is Level.ERROR and finding.message == "fleet training: g4dn.xlarge does not support EFA"


def test_efa_type_unknown_to_the_region_is_an_error(aws: Aws) -> None:
    env = fleet_changed(environment("prod"), 0, instance_types=["p9.96xlarge"])
    [finding] = check_efa(env, aws)
    assert finding.level is Level.ERROR and "not available in us-east-1" in finding.message
