"""A snapshot per stack per environment of the shipped config/: any change to a template shows up as a
reviewed diff.

Update with ``.venv/bin/python -m pytest tests/snapshot --snapshot-update`` and read the diff. The update also
records the digest of the config/*.yaml the snapshots were taken of (``CONFIG_DIGEST``). A user's own config/
gives other templates: locally the comparison is then skipped with that command as the fix; in CI (``CI`` set),
where config/ is the committed one, a digest that differs fails like any stale snapshot.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from scripts.diagram import config_digest
from tests.snapshot.normalize import normalize_template
from tests.synth import Synth

CONFIG_DIGEST = Path(__file__).resolve().parent / "config.sha256"

STACKS = [
    f"{env}-{stack}"
    for env in ("dev", "staging", "prod")
    for stack in ("Security", "Network", "Storage", "Image", "Fleets", "Monitoring")
]


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.fixture
def of_this_config(pytestconfig: pytest.Config) -> None:
    """Records the config digest on --snapshot-update; skips, outside CI, when config/ is not the one recorded."""
    current = config_digest()
    if pytestconfig.option.update_snapshots:
        CONFIG_DIGEST.write_text(current + "\n", encoding="utf-8")
        return
    recorded = CONFIG_DIGEST.read_text(encoding="utf-8").strip() if CONFIG_DIGEST.is_file() else None
    if recorded != current and not os.environ.get("CI"):
        pytest.skip(
            "config/*.yaml is not the config the snapshots were taken of (your own accounts and fleets); "
            "fix: to record your templates, run .venv/bin/python -m pytest tests/snapshot --snapshot-update"
        )


@pytest.mark.usefixtures("of_this_config")
@pytest.mark.parametrize("stack_name", STACKS)
def test_template_snapshot(shipped_synth: Synth, snapshot_json, stack_name: str) -> None:
    assert normalize_template(shipped_synth.stacks[stack_name].json) == snapshot_json


@pytest.mark.usefixtures("of_this_config")
def test_every_stack_has_a_snapshot(shipped_synth: Synth) -> None:
    assert sorted(shipped_synth.stacks) == sorted(STACKS)


def test_the_recorded_digest_is_of_the_committed_config() -> None:
    # What CI compares: the snapshots and their digest are of the same config/.
    assert CONFIG_DIGEST.is_file(), f"{CONFIG_DIGEST} is missing; fix: run pytest tests/snapshot --snapshot-update"
    if os.environ.get("CI"):
        assert CONFIG_DIGEST.read_text(encoding="utf-8").strip() == config_digest()


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
