"""Slurm on AWS PCS as the Slurm test environment's templates give it (tests/fixtures/config/slurm/hpc.yaml): every
PCS resource complete by its registry schema, node groups on their fleet's launch template at its latest version,
no Auto Scaling group or group alarm for a Slurm fleet, rule packs (at synth) and cfn-lint clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from tests.gpu_constructs.scheduler.helpers import ENV, logical_id
from tests.synth import StackTemplate, Synth

ROOT = Path(__file__).resolve().parents[3]
PCS_TYPES = ("AWS::PCS::Cluster", "AWS::PCS::ComputeNodeGroup", "AWS::PCS::Queue")


def _missing(schema: dict[str, Any], node: dict[str, Any], value: Any, where: str) -> list[str]:
    """The registry schema's required properties that ``value`` lacks, here and in every nested object it has."""
    if "$ref" in node:
        node = schema["definitions"][node["$ref"].rsplit("/", 1)[-1]]
    if not isinstance(value, dict) or "properties" not in node:
        if isinstance(value, list) and "items" in node:
            return [m for i, item in enumerate(value) for m in _missing(schema, node["items"], item, f"{where}[{i}]")]
        return []
    gaps = [f"{where}.{name}" for name in node.get("required", []) if name not in value]
    for name, sub in value.items():
        if name in node["properties"]:
            gaps += _missing(schema, node["properties"][name], sub, f"{where}.{name}")
    return gaps


def test_every_pcs_resource_has_what_its_registry_schema_requires(fleets: StackTemplate) -> None:
    found = 0
    for kind in PCS_TYPES:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", kind).schema
        assert schema["required"], kind  # the schema does require something: the check below is not empty
        for lid, resource in fleets.resources(kind).items():
            found += 1
            assert _missing(schema, schema, resource["Properties"], lid) == []
    # one cluster; login, training (On-Demand and Spot), block, small; a queue per Slurm fleet
    assert found == 1 + 5 + 3


def test_node_groups_launch_from_the_fleets_launch_template_at_its_latest_version(fleets: StackTemplate) -> None:
    templates = fleets.resources("AWS::EC2::LaunchTemplate")
    for lid, group in fleets.resources("AWS::PCS::ComputeNodeGroup").items():
        custom = group["Properties"]["CustomLaunchTemplate"]
        template = logical_id(custom["TemplateId"])
        assert template in templates, lid
        assert custom["Version"] == {"Fn::GetAtt": [template, "LatestVersionNumber"]}
        owner = group["Metadata"]["aws:cdk:path"].rsplit("/", 1)[0]
        assert templates[template]["Metadata"]["aws:cdk:path"].startswith(owner + "/"), lid


def test_a_slurm_fleet_has_no_auto_scaling_group(slurm_synth: Synth, fleets: StackTemplate) -> None:
    groups = [r["Metadata"]["aws:cdk:path"] for r in fleets.resources("AWS::AutoScaling::AutoScalingGroup").values()]
    assert groups == [f"{ENV}/Fleets/Fleet-inference/Group/ASG"]
    monitored = slurm_synth.stack(ENV, "Monitoring").json["Resources"]
    alarms = [r["Properties"].get("AlarmName", "") for r in monitored.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert not [a for a in alarms if "-training-" in a or "-small-" in a]


@pytest.mark.slow
def test_cfn_lint_is_clean_on_the_slurm_environment(slurm_synth: Synth) -> None:
    """The rule packs ran at synth (``slurm_synth`` fails on a finding); cfn-lint as ``make synth`` runs it."""
    templates = [str(s.path) for s in slurm_synth.stacks.values()]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), *templates], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""
    assert slurm_synth.validation_report().get("pluginReports") == []
