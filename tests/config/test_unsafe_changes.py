"""config/changes.py: each edit that would replace a resource in use is named with its field and safe way."""

from __future__ import annotations

from typing import Any

import pytest

from config.changes import unsafe_changes
from config.loader import CONFIG_DIR, load_environment
from config.schema import Environment
from tests.synth import SLURM_DIR


def _env(name: str = "dev") -> Environment:
    return load_environment(CONFIG_DIR / f"{name}.yaml")


def _edit(env: Environment, **update: Any) -> Environment:
    return Environment.model_validate({**env.model_dump(exclude_unset=True), **update})


def _fleet_update(env: Environment, index: int, **update: Any) -> Environment:
    data = env.model_dump(exclude_unset=True)
    data["fleets"][index] = {**data["fleets"][index], **update}
    return Environment.model_validate(data)


def test_an_unchanged_environment_has_no_unsafe_change() -> None:
    assert unsafe_changes(_env(), _env()) == []


def test_a_tag_edit_is_safe_where_the_placement_group_tags_are_pinned() -> None:
    env = _env()
    edited = _edit(env, tags={**env.tags, "CostCenter": "other"})
    assert unsafe_changes(env, edited) == []


def test_a_tag_edit_without_pinned_placement_group_tags_gives_the_block_to_pin() -> None:
    env = _edit(_env(), placement_group_tags=None)
    (change,) = unsafe_changes(env, _edit(env, tags={**env.tags, "CostCenter": "other"}))
    assert change.field == "tags"
    assert "placement_group_tags: {" in change.safe_way and "'CostCenter': 'ml-research-dev'" in change.safe_way


def test_placement_group_tags_and_strategy() -> None:
    env = _env()
    retagged = _edit(env, placement_group_tags={**env.tags, "Owner": "x"})
    assert [c.field for c in unsafe_changes(env, retagged)] == ["placement_group_tags"]
    spread = _fleet_update(env, 0, placement="spread")
    (change,) = unsafe_changes(env, spread)
    assert change.field == "fleets[0].placement" and "to 0" in change.safe_way


@pytest.mark.parametrize(
    ("field", "value"),
    [("port", 8081), ("internal", False)],
)
def test_service_port_and_scheme(field: str, value: Any) -> None:
    env = _env()
    data = env.model_dump(exclude_unset=True)
    service = data["fleets"][1]["service"]
    if field == "port":
        service["port"] = value
    else:
        service["load_balancer"]["internal"] = value
    (change,) = unsafe_changes(env, Environment.model_validate(data))
    assert change.field.startswith("fleets[1].service.")
    assert "second served fleet" in change.safe_way


def test_file_system_replacements_and_shrinking() -> None:
    env = _env("staging")
    data = env.model_dump(exclude_unset=True)
    data["storage"]["file_system"]["availability_zone"] = "us-east-1b"
    data["fleets"] = [{**f, "availability_zones": ["us-east-1b"]} for f in data["fleets"]]
    fields = [c.field for c in unsafe_changes(env, Environment.model_validate(data))]
    assert fields == ["storage.file_system.availability_zone"]
    bigger = _env("prod")
    data = bigger.model_dump(exclude_unset=True)
    data["storage"]["file_system"]["storage_capacity_gib"] = 2400
    (change,) = unsafe_changes(bigger, Environment.model_validate(data))
    assert "cannot shrink" in change.message


def test_network_edits_need_a_new_environment() -> None:
    env = _env()
    data = env.model_dump(exclude_unset=True)
    data["network"]["vpc_cidr"] = "10.11.0.0/16"
    data["fleets"][1]["service"]["load_balancer"]["allowed_cidrs"] = ["10.11.0.0/16"]
    (change,) = unsafe_changes(env, Environment.model_validate(data))
    assert change.field == "network.vpc_cidr" and "new environment" in change.safe_way


def test_relinking_a_directory_or_prefix_is_refused_adding_one_is_not() -> None:
    env = _env("staging")
    data = env.model_dump(exclude_unset=True)
    links = [a.model_dump() for a in env.storage.associations]
    data["storage"]["associations"] = [{**links[0], "bucket_prefix": "datasets-v2/"}, *links[1:]]
    (change,) = unsafe_changes(env, Environment.model_validate(data))
    assert change.field == "storage.associations[0]" and "remove the association and deploy" in change.safe_way
    data["storage"]["associations"] = [*links, {"file_system_path": "/scratch-data", "bucket_prefix": "scratch/"}]
    assert unsafe_changes(env, Environment.model_validate(data)) == []


def _slurm_env() -> Environment:

    return load_environment(SLURM_DIR / "hpc.yaml")


def test_a_slurm_cluster_size_change_replaces_the_cluster_and_its_accounting() -> None:
    env = _slurm_env()
    data = env.model_dump(exclude_unset=True)
    data["slurm"]["cluster_size"] = "large" if env.slurm and env.slurm.cluster_size.value != "large" else "medium"
    (change,) = unsafe_changes(env, Environment.model_validate(data))
    assert change.field == "slurm.cluster_size" and "accounting database" in change.message


def test_moving_a_fleet_between_schedulers_is_refused() -> None:
    env = _slurm_env()
    data = env.model_dump(exclude_unset=True)
    index = next(i for i, f in enumerate(env.fleets) if f.scheduler.value == "slurm")
    moved = _moved_to_auto_scaling(data, index)
    if moved is None:
        pytest.skip("the Slurm fixture's fleets all need Slurm-only settings")
    (change,) = [c for c in unsafe_changes(moved, env) if c.field.endswith(".scheduler")]
    assert "PCS" not in change.message and "Auto Scaling group" in change.message


def _moved_to_auto_scaling(data: dict[str, Any], index: int) -> Environment | None:
    fleets = [dict(f) for f in data["fleets"]]
    fleets[index] = {**fleets[index], "scheduler": "none"}
    try:
        return Environment.model_validate({**data, "fleets": fleets})
    except ValueError:  # a Slurm-only setting (a Capacity Block's size, ...): pydantic's ValidationError is one
        return None


def _slurm_edit(change: Any) -> list[Any]:
    env = _slurm_env()
    data = env.model_dump(exclude_unset=True)
    change(data)
    return unsafe_changes(env, Environment.model_validate(data))


def test_a_slurm_edit_that_removes_a_node_group_is_refused_one_that_keeps_them_is_not() -> None:
    def on_demand_only(data: dict[str, Any]) -> None:
        training = next(f for f in data["fleets"] if f["name"] == "training")
        training["on_demand_percentage_above_base"] = 100  # the Spot group's max becomes 0: it goes

    (change,) = _slurm_edit(on_demand_only)
    assert change.field.endswith(".capacity") and "spot PCS node group" in change.message
    assert "state=drain" in change.safe_way

    def more_nodes(data: dict[str, Any]) -> None:
        next(f for f in data["fleets"] if f["name"] == "training")["capacity"]["max"] = 3

    assert _slurm_edit(more_nodes) == []  # both groups stay, each smaller or larger in place


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("accounting", False, "cannot turn accounting off"),
        ("slurm_version", "25.11", "carries one version"),
        ("login", {"instance_type": "m7i.xlarge", "count": 1}, "replaces the login node group"),
    ],
)
def test_what_pcs_cannot_change_under_running_work_is_refused(field: str, value: Any, words: str) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["slurm"][field] = value
        if field == "slurm_version":
            data["image"]["versions"]["PcsSlurmVersion"] = "25.11.1-1"

    changes = [c for c in _slurm_edit(edit) if c.field == f"slurm.{field}" or c.field.startswith(f"slurm.{field}.")]
    assert len(changes) == 1 and words in changes[0].message and changes[0].safe_way


def test_bringing_a_slurm_fleet_back_from_0_is_not_refused() -> None:
    def parked(data: dict[str, Any]) -> None:
        fleet = next(f for f in data["fleets"] if f["name"] == "training")
        fleet.update(capacity={"min": 0, "max": 0}, on_demand_base_capacity=0)

    env = _slurm_env()
    data = env.model_dump(exclude_unset=True)
    parked(data)
    at_zero = Environment.model_validate(data)
    back = at_zero.model_dump(exclude_unset=True)
    fleet = next(f for f in back["fleets"] if f["name"] == "training")
    fleet.update(capacity={"min": 0, "max": 2}, on_demand_base_capacity=2, on_demand_percentage_above_base=0)
    # The parked fleet's one group has max 0 (no node): whichever group it was, nothing stops.
    assert unsafe_changes(at_zero, Environment.model_validate(back)) == []
