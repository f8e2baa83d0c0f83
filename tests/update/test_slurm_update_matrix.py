"""The update matrix on a Slurm environment (tests/fixtures/config/slurm/hpc.yaml: three Slurm fleets on PCS
beside an Auto Scaling fleet): every in-place edit of tests/update/edits.py and the Slurm ones at once replace
nothing in use (the PCS cluster, its node groups and queues included); the Slurm edits that replace what runs
jobs are refused by ``validate`` with the safe way, and every reader follows when done anyway."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.changes import unsafe_changes
from config.loader import load_environment
from tests.synth import SLURM_DIR, Synth, synthesize_once
from tests.update.checks import check_in_place, environment_of, in_use
from tests.update.edits import IN_PLACE, Edit
from tests.update.replacements import Templates, consumers_left_behind, replacements
from tests.update.slurm_edits import SLURM_IN_PLACE, SLURM_REFUSED
from tests.update.synth_edit import read_config, synth_edited, templates_of

ENV = "hpc"


@pytest.fixture(scope="module")
def before(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Templates:
    synth: Synth = synthesize_once(pytestconfig, tmp_path_factory, "slurm-cdk.out", SLURM_DIR)
    return templates_of(synth, ENV)


def test_every_in_place_edit_at_once_replaces_nothing_in_use(before: Templates, tmp_path: Path) -> None:
    data = read_config(SLURM_DIR, ENV)
    # The environment's placement groups carry its tags: pinned first, as validate's message says (nothing changes).
    data.setdefault("placement_group_tags", dict(data["tags"]))
    applied = [e.name for e in (*IN_PLACE, *SLURM_IN_PLACE) if e.apply(data) is None]
    assert {e.name for e in SLURM_IN_PLACE} <= set(applied)
    assert {"tags", "capacity", "instance types", "new fleet"} <= set(applied)
    check_in_place(SLURM_DIR, ENV, before, synth_edited(SLURM_DIR, ENV, data, tmp_path), data, tmp_path)


@pytest.mark.parametrize("edit", SLURM_REFUSED, ids=lambda e: e.name)
def test_a_slurm_edit_that_replaces_what_runs_jobs_is_refused(edit: Edit, before: Templates, tmp_path: Path) -> None:
    data = read_config(SLURM_DIR, ENV)
    assert edit.apply(data) is None
    after = synth_edited(SLURM_DIR, ENV, data, tmp_path)
    found = replacements(before, after)
    assert any(r.type.startswith("AWS::PCS::") for r in found), f"{edit.name}: no PCS resource is replaced"
    assert in_use(found)
    changes = unsafe_changes(load_environment(SLURM_DIR / f"{ENV}.yaml"), environment_of(data, tmp_path))
    assert changes and all(c.safe_way for c in changes)
    assert consumers_left_behind(before, after, found) == []
