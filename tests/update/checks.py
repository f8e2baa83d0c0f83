"""What every edit of the update matrix is checked for (tests/update/test_*update_matrix.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from config.changes import unsafe_changes
from config.loader import load_environment
from tests.update.replacements import Replacement, Templates, consumers_left_behind, replacements


def environment_of(data: dict[str, Any], tmp_path: Path) -> Any:
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_environment(path)


def in_use(found: list[Replacement]) -> list[str]:
    return [str(r) for r in found if r.protected]


def ami_parameter_writers(templates: Templates) -> dict[str, Any]:
    """The custom resources that write the fleets' AMI parameter (their Create/Update calls)."""
    return {
        f"{stack}/{lid}": r["Properties"]
        for stack, t in templates.items()
        for lid, r in t["Resources"].items()
        if r["Type"] == "Custom::AWS" and "putParameter" in json.dumps(r["Properties"])
    }


def image_versions_collide(before: Templates, after: Templates, found: list[Replacement]) -> list[str]:
    """Replaced Image Builder components and recipes whose (Name, Version) stays: the new one would collide."""
    collide = []
    for r in found:
        if r.type in ("AWS::ImageBuilder::Component", "AWS::ImageBuilder::ImageRecipe"):
            old = before[r.stack]["Resources"][r.logical_id]["Properties"]
            new = after.get(r.stack, {}).get("Resources", {}).get(r.logical_id, {}).get("Properties")
            if new is not None and (old["Name"], old["Version"]) == (new["Name"], new["Version"]):
                collide.append(str(r))
    return collide


def check_in_place(
    config_dir: Path, env: str, before: Templates, after: Templates, data: dict[str, Any], tmp_path: Path
) -> None:
    """Nothing in use replaced, no reader left behind, no image version collision, the AMI writers unchanged,
    and ``validate`` against the deployed config (``config_dir``) says nothing."""
    found = replacements(before, after)
    assert in_use(found) == []
    assert consumers_left_behind(before, after, found) == []
    assert image_versions_collide(before, after, found) == []
    assert ami_parameter_writers(after) == ami_parameter_writers(before)
    deployed = load_environment(config_dir / f"{env}.yaml")
    assert unsafe_changes(deployed, environment_of(data, tmp_path)) == []
