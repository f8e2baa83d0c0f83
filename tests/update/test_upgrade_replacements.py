"""Upgrading from the previous release: its templates (git tag) against the current snapshots, through the
update matrix's replacement analysis. Nothing that holds state, carries a fixed name or is used by running
nodes is replaced; a resource that leaves the template with ``DeletionPolicy: Retain`` stays where it is."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.update.replacements import Templates, consumers_left_behind, replacements

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = "tests/snapshot/__snapshots__/test_snapshots"
STACKS = ("Security", "Network", "Storage", "Image", "Fleets", "Monitoring")


def _releases() -> list[str]:
    tags = subprocess.run(
        ["git", "tag", "--list", "release-*", "--sort=version:refname"], cwd=ROOT, capture_output=True, text=True
    )
    return tags.stdout.split() if tags.returncode == 0 else []


PREVIOUS = (_releases() or [None])[-1]
pytestmark = pytest.mark.skipif(
    PREVIOUS is None,
    reason="no release-* tag in this checkout (a shallow clone, or tags not fetched: git fetch --tags)",
)


def _template(stack: str, revision: str | None) -> dict[str, Any]:
    path = f"{SNAPSHOTS}/test_template_snapshot[{stack}].json"
    if revision is None:
        return json.loads((ROOT / path).read_text())
    shown = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(shown.stdout)


def _templates(env: str, revision: str | None) -> Templates:
    return {f"{env}-{s}": _template(f"{env}-{s}", revision) for s in STACKS}


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_upgrading_from_the_previous_release_replaces_nothing_in_use(env: str) -> None:
    before, after = _templates(env, PREVIOUS), _templates(env, None)
    found = replacements(before, after)
    retained = {
        (r.stack, r.logical_id)
        for r in found
        if r.reason == "removed from the template"
        and before[r.stack]["Resources"][r.logical_id].get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate")
    }
    assert [str(r) for r in found if r.protected and (r.stack, r.logical_id) not in retained] == []
    assert consumers_left_behind(before, after, found) == []
