"""The edits users make to a deployed environment's config/<env>.yaml, as functions on its parsed YAML.

Each edit changes the mapping in place and returns None, or returns why it does not apply to this
environment (no served fleet, a scratch file system, ...). Edits are written for any valid config, not
for the shipped values: they find what they change.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from config.audit import LOG_RETENTION_DAYS
from config.storage import PER_UNIT_THROUGHPUT

Config = dict[str, Any]


@dataclass(frozen=True)
class Edit:
    name: str
    apply: Callable[[Config], str | None]
    #: What it does to a running environment (docs/operations.md, "What an edit does to a running environment").
    effect: str


def _served(data: Config) -> list[Config]:
    return [f for f in data.get("fleets", []) if f.get("service")]


def tags(data: Config) -> str | None:
    data["tags"]["CostCenter"] = data["tags"]["CostCenter"] + "-2"
    data["tags"]["Team"] = "vision"
    return None


def new_fleet(data: Config) -> str | None:
    unserved = [f for f in data.get("fleets", []) if not f.get("service")]
    if not unserved:
        return "no fleet without a service to copy"
    extra = copy.deepcopy(unserved[0])
    extra["name"] = "extra"
    data["fleets"].append(extra)
    return None


def log_retention(data: Config) -> str | None:
    days = data["logging"]["retention_days"]
    data["logging"]["retention_days"] = LOG_RETENTION_DAYS[
        (LOG_RETENTION_DAYS.index(days) + 1) % len(LOG_RETENTION_DAYS)
    ]
    return None


def capacity(data: Config) -> str | None:
    fleets = [f for f in data.get("fleets", []) if not f.get("capacity_block")]  # a block's max is its size
    if not fleets:
        return "no fleet outside a Capacity Block"
    for fleet in fleets:
        fleet["capacity"]["max"] += 1
    return None


def fsx_throughput(data: Config) -> str | None:
    fs = data["storage"]["file_system"]
    steps = PER_UNIT_THROUGHPUT.get(fs["deployment_type"])
    if not steps:
        return f"{fs['deployment_type']} has no per-unit throughput"
    higher = [s for s in steps if s > fs["per_unit_storage_throughput"]]
    if not higher:
        return "already at the highest throughput"
    fs["per_unit_storage_throughput"] = higher[0]
    return None


def fsx_capacity(data: Config) -> str | None:
    fs = data["storage"]["file_system"]
    fs["storage_capacity_gib"] += 2400 if fs["storage_capacity_gib"] >= 2400 else 1200
    return None


def instance_types(data: Config) -> str | None:
    fleets = [f for f in data.get("fleets", []) if len(f["instance_types"]) > 1]
    if not fleets:
        return "no fleet with more than one instance type"
    fleets[0]["instance_types"].reverse()
    return None


def scaling(data: Config) -> str | None:
    stepped = [f for f in data.get("fleets", []) if f.get("scaling", {}).get("step")]
    if not stepped:
        return "no fleet with step scaling"
    step = stepped[0]["scaling"]["step"]
    step["scale_out_above_percent"] -= 5
    step["scale_in_after_minutes"] += 5
    for schedule in stepped[0]["scaling"].get("schedules", []):
        minute, rest = schedule["cron"].split(" ", 1)
        schedule["cron"] = f"{(int(minute) + 30) % 60} {rest}" if minute.isdigit() else schedule["cron"]
    return None


def alarm_thresholds(data: Config) -> str | None:
    data.setdefault("alarms", {})["gpu_temperature_critical"] = {
        "threshold": 87,
        "period_minutes": 1,
        "evaluation_periods": 3,
    }
    for fleet in _served(data):
        fleet["service"].setdefault("alarms", {})["p99_latency_seconds"] = 3
    return None


def image_version(data: Config) -> str | None:
    image = data.get("image", {})
    if not image.get("build"):
        return "this environment does not build images"
    image["versions"]["DcgmVersion"] = "4.7.1"
    return None


def certificate(data: Config) -> str | None:
    served = [f for f in _served(data) if not f["service"]["load_balancer"].get("certificate_arn")]
    if not served:
        return "no served fleet without a certificate"
    arn = f"arn:aws:acm:{data['region']}:{data['account']}:certificate/12345678-1234-4234-8234-123456789012"
    served[0]["service"]["load_balancer"]["certificate_arn"] = arn
    return None


def _catalog_type(name: str) -> Any:
    from config.catalog import UnknownInstanceType, get_instance_type

    try:
        return get_instance_type(name)
    except UnknownInstanceType:
        return None


def _auto_scaling(data: Config) -> list[Config]:
    """The fleets on an Auto Scaling group (a Slurm fleet's node groups take its types create-only)."""
    return [f for f in data.get("fleets", []) if f.get("scheduler", "none") == "none"]


def new_instance_type(data: Config) -> str | None:
    for fleet in _auto_scaling(data):
        first = _catalog_type(fleet["instance_types"][0])
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"):
            name = f"{first.family}.{size}"
            other = _catalog_type(name)
            if name not in fleet["instance_types"] and other is not None and other.gpu_count == first.gpu_count:
                fleet["instance_types"].append(name)
                return None
    return "no Auto Scaling fleet with a catalog type of the same GPU count to add"


def capacity_desired(data: Config) -> str | None:
    changed = False
    for fleet in _auto_scaling(data):  # PCS starts Slurm nodes on submit: they have no desired
        cap = fleet["capacity"]
        if cap.get("desired", cap["min"]) < cap["max"]:
            cap["desired"] = cap.get("desired", cap["min"]) + 1
            changed = True
    return None if changed else "every fleet at its max"


def association_prefix(data: Config) -> str | None:
    from config.storage import Storage

    storage = data["storage"]
    if "associations" not in storage:
        storage["associations"] = [
            a.model_dump() for a in Storage.model_fields["associations"].get_default(call_default_factory=True)
        ]
    if not storage["associations"]:
        return "no data repository association"
    storage["associations"][0]["bucket_prefix"] = storage["associations"][0]["bucket_prefix"].rstrip("/") + "-v2/"
    return None


def budget(data: Config) -> str | None:
    if not data.get("budget"):
        return "no budget"
    data["budget"]["monthly_usd"] = data["budget"]["monthly_usd"] * 2
    data["budget"]["actual_percent"] = [50, 80, 100]
    return None


def remove_fleet(data: Config) -> str | None:
    if len(data.get("fleets", [])) < 2:
        return "fewer than two fleets"
    data["fleets"].pop()
    return None


def service_port(data: Config) -> str | None:
    served = _served(data)
    if not served:
        return "no served fleet"
    service = served[0]["service"]
    old = service.get("port", 8080)
    service["port"] = old + 1
    if "command" in service:
        service["command"] = service["command"].replace(f"--port {old}", f"--port {old + 1}")
    return None


def internal(data: Config) -> str | None:
    served = _served(data)
    if not served:
        return "no served fleet"
    lb = served[0]["service"]["load_balancer"]
    lb["internal"] = not lb.get("internal", True)
    return None


def fsx_deployment_type(data: Config) -> str | None:
    fs = data["storage"]["file_system"]
    if fs["deployment_type"] == "PERSISTENT_2":
        return "already PERSISTENT_2"
    fs["deployment_type"] = "PERSISTENT_2"
    fs["per_unit_storage_throughput"] = 125
    fs["storage_capacity_gib"] = max(1200, fs["storage_capacity_gib"])
    return None


def fsx_zone(data: Config) -> str | None:
    fs = data["storage"]["file_system"]
    others = [z for z in data["availability_zones"] if z != fs["availability_zone"]]
    if not others:
        return "one availability zone"
    old = fs["availability_zone"]
    fs["availability_zone"] = others[0]
    for fleet in data.get("fleets", []):  # fleets in the file system's zone follow it
        zones = fleet.get("availability_zones")
        if zones == [old]:
            fleet["availability_zones"] = [others[0]]
    return None


def placement_tags(data: Config) -> str | None:
    if not any(f.get("placement", "none") != "none" for f in data.get("fleets", [])):
        return "no fleet in a placement group"
    pinned = data.setdefault("placement_group_tags", dict(data["tags"]))
    pinned["CostCenter"] = pinned["CostCenter"] + "-2"
    return None


#: Edits that change nothing CloudFormation replaces under a running environment (applied together).
IN_PLACE: tuple[Edit, ...] = (
    Edit("tags", tags, "every resource's tags change in place; placement groups keep placement_group_tags"),
    Edit("new fleet", new_fleet, "the new fleet's resources are created; nothing existing is replaced"),
    Edit("log retention", log_retention, "log groups' retention changes in place"),
    Edit("capacity", capacity, "the groups' min/max/desired change in place"),
    Edit("FSx throughput step", fsx_throughput, "FSx changes throughput in place (the file system stays mounted)"),
    Edit("FSx capacity growth", fsx_capacity, "FSx grows storage in place (optimizing for hours after)"),
    Edit("instance types", instance_types, "a new launch template version; running nodes stay until replaced"),
    Edit("scaling thresholds and schedules", scaling, "policies, alarms and scheduled actions change in place"),
    Edit("alarm thresholds", alarm_thresholds, "alarms change in place"),
    Edit("certificate", certificate, "the listener changes in place to HTTPS"),
    Edit("new instance type", new_instance_type, "a new launch template version and mixed-instances override"),
    Edit("desired capacity", capacity_desired, "the groups' desired changes in place"),
    Edit("budget", budget, "the amount changes in place; new percentages are a new budget under a new name"),
    Edit(
        "image component version", image_version, "a new component version and recipe version; the next build uses them"
    ),
)

#: Edits that replace a resource in use: ``validate`` refuses them against the deployed config, with the safe way.
REFUSED: tuple[Edit, ...] = (
    Edit("service port", service_port, "replaces the target group (Port is create-only)"),
    Edit("load balancer internal/internet-facing", internal, "replaces the load balancer (Scheme is create-only)"),
    Edit("FSx deployment type", fsx_deployment_type, "replaces the file system (DeploymentType is create-only)"),
    Edit("FSx availability zone", fsx_zone, "replaces the file system (SubnetIds is create-only)"),
    Edit("placement group tags", placement_tags, "replaces the placement group (Tags is create-only)"),
    Edit(
        "data repository association prefix",
        association_prefix,
        "replaces the association (DataRepositoryPath is create-only)",
    ),
)

REMOVAL = Edit("remove a fleet", remove_fleet, "the removed fleet's resources are deleted; no other is replaced")
