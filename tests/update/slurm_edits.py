"""The edits users make to an environment's Slurm side (the ``slurm:`` section, ``scheduler: slurm`` fleets), as
functions on its parsed YAML, like tests/update/edits.py: each returns None once applied, or why it does not apply."""

from __future__ import annotations

from tests.update.edits import Config, Edit


def _slurm_fleets(data: Config) -> list[Config]:
    return [f for f in data.get("fleets", []) if f.get("scheduler") == "slurm"]


def idle_time(data: Config) -> str | None:
    if not data.get("slurm"):
        return "no slurm section"
    data["slurm"]["scale_down_idle_seconds"] = data["slurm"].get("scale_down_idle_seconds", 600) + 300
    return None


def people(data: Config) -> str | None:
    slurm = data.get("slurm")
    if slurm is None:
        return "no slurm section"
    slurm.setdefault("teams", []).append({"name": "speech", "shares": 5})
    uids = [u["uid"] for u in slurm.setdefault("users", [])]
    slurm["users"].append({"name": "carol", "uid": max(uids, default=20000) + 1, "team": "speech"})
    return None


def fleet_order(data: Config) -> str | None:
    """A Slurm fleet of several zones moved first, its zones reversed: the first Slurm fleet's first zone changes;
    the controller's subnet must not."""
    slurm = [f for f in _slurm_fleets(data) if len(f["availability_zones"]) > 1]
    if not slurm:
        return "no Slurm fleet in several zones"
    data["fleets"].remove(slurm[-1])
    data["fleets"].insert(0, slurm[-1])
    slurm[-1]["availability_zones"].reverse()
    return None


def type_order(data: Config) -> str | None:
    fleets = [f for f in _slurm_fleets(data) if len(f["instance_types"]) > 1]
    if not fleets:
        return "no Slurm fleet with more than one instance type"
    fleets[0]["instance_types"].reverse()
    return None


def slurm_types(data: Config) -> str | None:
    fleets = [f for f in _slurm_fleets(data) if len(f["instance_types"]) > 1]
    if not fleets:
        return "no Slurm fleet with more than one instance type"
    fleets[0]["instance_types"].pop()
    return None


def cluster_size(data: Config) -> str | None:
    slurm = data.get("slurm")
    if slurm is None:
        return "no slurm section"
    slurm["cluster_size"] = "medium" if slurm.get("cluster_size", "small") == "small" else "small"
    return None


def node_group_removed(data: Config) -> str | None:
    """A mixed Slurm fleet made On-Demand only: its Spot node group's max would be 0, so the group goes."""
    mixed = [
        f
        for f in _slurm_fleets(data)
        if not f.get("capacity_block") and f.get("on_demand_percentage_above_base", 0) < 100
    ]
    if not mixed:
        return "no Slurm fleet with a Spot node group"
    mixed[0]["on_demand_percentage_above_base"] = 100
    return None


def login_type(data: Config) -> str | None:
    slurm = data.get("slurm")
    if slurm is None:
        return "no slurm section"
    login = slurm.setdefault("login", {})
    login["instance_type"] = "m7i.xlarge" if login.get("instance_type", "m7i.large") != "m7i.xlarge" else "m7i.large"
    return None


SLURM_IN_PLACE: tuple[Edit, ...] = (
    Edit("Slurm idle time", idle_time, "the PCS cluster's Slurm configuration changes in place"),
    Edit("Slurm teams and people", people, "new launch template versions (the people file); accounts synced"),
    Edit("Slurm fleet order", fleet_order, "nothing: the controller stays in the environment's first zone"),
    Edit("Slurm fleet type order", type_order, "nothing replaced: a node group's instance types are a set"),
)

SLURM_REFUSED: tuple[Edit, ...] = (
    Edit(
        "Slurm fleet instance types", slurm_types, "replaces the fleet's node groups (InstanceConfigs is create-only)"
    ),
    Edit("Slurm cluster size", cluster_size, "replaces the PCS cluster (Size is create-only), queues and groups"),
    Edit("Slurm node group removed", node_group_removed, "deletes the node group with its nodes and their jobs"),
    Edit("Slurm login instance type", login_type, "replaces the login node group (InstanceConfigs is create-only)"),
)
