"""A snapshot per stack per environment of the shipped config/: any change to a template shows up as a
reviewed diff.

Update with ``.venv/bin/python -m pytest tests/snapshot --snapshot-update`` and read the diff.
"""

from __future__ import annotations

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from tests.snapshot.normalize import normalize_template
from tests.synth import Synth

STACKS = [
    f"{env}-{stack}"
    for env in ("dev", "staging", "prod")
    for stack in ("Security", "Network", "Storage", "Image", "Fleets", "Monitoring")
]


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("stack_name", STACKS)
def test_template_snapshot(shipped_synth: Synth, snapshot_json, stack_name: str) -> None:
    assert normalize_template(shipped_synth.stacks[stack_name].json) == snapshot_json


def test_every_stack_has_a_snapshot(shipped_synth: Synth) -> None:
    assert sorted(shipped_synth.stacks) == sorted(STACKS)


def test_normalization_removes_machine_specific_values() -> None:
    template = {
        "Resources": {
            "CDKMetadata": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:deflate64:abc"}},
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Code": {"S3Key": "a" * 64 + ".zip"}},
            },
        },
        "Conditions": {"CDKMetadataAvailable": {}},
    }
    assert normalize_template(template) == {
        "Resources": {"Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Code": {"S3Key": "<asset-hash>.zip"}}}}
    }
