"""A snapshot of the pipeline stack's template: any change to the pipeline shows up as a reviewed diff.

Update with ``.venv/bin/python -m pytest tests/snapshot --snapshot-update`` and read the diff.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from tests.pipeline_synth import PipelineSynth
from tests.snapshot.normalize import normalize_template

#: The asset publishing buildspec file is named after a hash of its content (it lists the asset hashes).
_BUILDSPEC_FILE = re.compile(r"\bbuildspec-[0-9a-f]+-")


def _scrub_buildspec_names(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub_buildspec_names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_buildspec_names(v) for v in value]
    if isinstance(value, str):
        return _BUILDSPEC_FILE.sub("buildspec-<hash>-", value)
    return value


def normalize_pipeline_template(template: dict[str, Any]) -> dict[str, Any]:
    """``normalize_template`` (CDK metadata, asset hashes), and the hash in the asset buildspec's file name."""
    return _scrub_buildspec_names(normalize_template(template))


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def test_pipeline_template_snapshot(pipeline_synth: PipelineSynth, snapshot_json) -> None:
    assert normalize_pipeline_template(pipeline_synth.json) == snapshot_json


def test_normalization_removes_the_asset_buildspec_hash() -> None:
    template = {
        "Resources": {
            "P": {
                "Type": "AWS::CodeBuild::Project",
                "Properties": {"Source": {"BuildSpec": "buildspec-c8b28f823b-FileAsset.yaml"}},
            }
        }
    }
    assert normalize_pipeline_template(template) == {
        "Resources": {
            "P": {
                "Type": "AWS::CodeBuild::Project",
                "Properties": {"Source": {"BuildSpec": "buildspec-<hash>-FileAsset.yaml"}},
            }
        }
    }
