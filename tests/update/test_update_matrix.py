"""The update matrix: the edits users make to a running environment, each synthesized before and after.

"Before" is the shipped config/ as synthesized for the whole run (``shipped_synth``); "after" is one
environment synthesized with the edit applied to its file. What CloudFormation would replace comes from
the registry schemas' createOnlyProperties (tests/update/replacements.py). An edit either replaces nothing
that holds state, carries a fixed name or is in use by running nodes, or ``validate`` refuses it against
the deployed config with the safe way (config/changes.py); either way no consumer keeps reading a
replaced resource. docs/operations.md carries the table.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from config.changes import unsafe_changes
from config.loader import CONFIG_DIR, load_environment
from tests.synth import Synth
from tests.update.checks import ami_parameter_writers, check_in_place, environment_of, in_use
from tests.update.edits import IN_PLACE, REFUSED, REMOVAL, Edit
from tests.update.replacements import Templates, consumers_left_behind, replacements
from tests.update.slurm_edits import SLURM_IN_PLACE, SLURM_REFUSED
from tests.update.synth_edit import read_config, synth_edited, synth_files, templates_of

ENVS = ("dev", "staging", "prod")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def before(shipped_synth: Synth) -> dict[str, Templates]:
    return {env: templates_of(shipped_synth, env) for env in ENVS}


def _edited(env: str, edits: tuple[Edit, ...]) -> tuple[dict[str, Any], list[str]]:
    data = read_config(CONFIG_DIR, env)
    applied = [e.name for e in edits if e.apply(data) is None]
    return data, applied


def _first_env(edit: Edit) -> tuple[str, dict[str, Any]]:
    """The first shipped environment the edit applies to (dev, then staging, then prod), with its edited config."""
    reasons = []
    for env in ENVS:
        data, applied = _edited(env, (edit,))
        if applied:
            return env, data
        reasons.append(f"{env}: {edit.apply(copy.deepcopy(read_config(CONFIG_DIR, env)))}")
    pytest.skip(f"{edit.name} applies to no environment ({'; '.join(reasons)})")


@pytest.mark.parametrize("edit", IN_PLACE, ids=lambda e: e.name)
def test_each_in_place_edit_alone_replaces_nothingin_use(
    edit: Edit, before: dict[str, Templates], tmp_path: Path
) -> None:
    env, data = _first_env(edit)
    check_in_place(CONFIG_DIR, env, before[env], synth_edited(CONFIG_DIR, env, data, tmp_path), data, tmp_path)


@pytest.mark.parametrize("env", ["staging", "prod"])
def test_every_in_place_edit_at_once_replaces_nothingin_use(
    env: str, before: dict[str, Templates], tmp_path: Path
) -> None:
    data, applied = _edited(env, IN_PLACE)
    assert applied  # the shipped environments take most of them (tags, capacity, log retention at least)
    check_in_place(CONFIG_DIR, env, before[env], synth_edited(CONFIG_DIR, env, data, tmp_path), data, tmp_path)


@pytest.mark.parametrize("edit", REFUSED, ids=lambda e: e.name)
def test_an_edit_that_replaces_what_is_in_use_is_refused_and_its_consumers_follow(
    edit: Edit, before: dict[str, Templates], tmp_path: Path
) -> None:
    env, data = _first_env(edit)
    after = synth_edited(CONFIG_DIR, env, data, tmp_path)
    found = replacements(before[env], after)
    # The templates confirm the refusal is needed: something in use is replaced ...
    assert in_use(found), f"{edit.name}: nothing in use is replaced: the refusal is not needed"
    # ... validate refuses it, naming the field, with the safe way ...
    changes = unsafe_changes(load_environment(CONFIG_DIR / f"{env}.yaml"), environment_of(data, tmp_path))
    assert changes and all(c.safe_way for c in changes)
    # ... and done anyway (--allow-replacement), every stack that reads the replaced resource changes with it.
    assert consumers_left_behind(before[env], after, found) == []


def test_removing_a_fleet_deletes_its_own_resources_only(before: dict[str, Templates], tmp_path: Path) -> None:
    data = read_config(CONFIG_DIR, "dev")
    removed = data["fleets"][-1]["name"]
    assert REMOVAL.apply(data) is None
    after = synth_edited(CONFIG_DIR, "dev", data, tmp_path)
    found = replacements(before["dev"], after)
    assert found  # the fleet's group, template, alarms ...
    paths = {
        str(r): before["dev"][r.stack]["Resources"][r.logical_id].get("Metadata", {}).get("aws:cdk:path", "")
        for r in found
    }
    others = [r for r, path in paths.items() if f"-{removed}/" not in path and f"-{removed}-" not in path]
    assert others == []
    assert consumers_left_behind(before["dev"], after, found) == []


def test_a_new_environment_replaces_nothing_in_the_others(before: dict[str, Templates], tmp_path: Path) -> None:
    """A copy of staging named qa, in its own account, receiving the AMIs the building environment shares."""
    qa = read_config(CONFIG_DIR, "staging")
    qa.update(name="qa", account="444444444444")
    qa["tags"] = {**qa["tags"], "Environment": "qa"}
    qa.pop("placement_group_tags", None)
    qa["network"]["vpc_cidr"] = "10.40.0.0/16"
    for fleet in qa.get("fleets", []):
        lb = (fleet.get("service") or {}).get("load_balancer")
        if lb:
            lb["allowed_cidrs"] = ["10.40.0.0/16"]
    builders = [n for n in ENVS if read_config(CONFIG_DIR, n).get("image", {}).get("build")]
    files = {"qa": qa}
    for name in builders:
        data = read_config(CONFIG_DIR, name)
        data["image"]["share_with"] = [*data["image"].get("share_with", []), "qa"]
        files[name] = data
    after = synth_files(CONFIG_DIR, files, [*builders, "staging", "qa"], tmp_path)
    for env in [*builders, "staging"]:
        found = replacements(before[env], after[env])
        assert in_use(found) == [], env
        assert consumers_left_behind(before[env], after[env], found) == [], env
        assert ami_parameter_writers(after[env]) == ami_parameter_writers(before[env]), env
    assert after["qa"]  # and the new environment synthesizes


def test_the_table_in_the_operations_guide_lists_every_edit() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "## What an edit does to a running environment" in guide
    edits = (*IN_PLACE, *REFUSED, REMOVAL, *SLURM_IN_PLACE, *SLURM_REFUSED)
    missing = [e.name for e in edits if f"| {e.name} |" not in guide]
    assert missing == []
