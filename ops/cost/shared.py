"""What an environment pays besides its fleets' instances: FSx for Lustre, NAT gateways, interface
endpoints, the served fleets' load balancers, EBS volumes (of running nodes and of a warm pool's stopped
ones) and CloudWatch metrics and alarms. What depends on traffic or volume is listed by ``left_out``.

Each item is priced at the fleets' min, desired and max levels (``schedule``): EBS volumes and per-node
metrics follow the instance-hours a month the schedules give; the rest is there every hour. An item's
hourly figure is its monthly one spread over 730 hours.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from config.catalog import get_instance_type
from config.fleets import Fleet
from config.network import EgressMode
from config.schema import Environment
from gpu_constructs.fleet.render.agent_config import DEFAULT_DISK_PATHS
from gpu_constructs.fleet.render.agent_metrics import (
    DISK_MEASUREMENTS,
    GPU_MEASUREMENTS,
    MEM_MEASUREMENTS,
    metric_names,
)
from ops.cost.prices import HOURS_PER_MONTH, PriceTable
from ops.cost.schedule import Usage

#: Interface endpoints of an isolated VPC (gpu_constructs/network/vpc_endpoints.py INTERFACE_SERVICES;
#: a test holds the two equal), each billed per zone it serves.
INTERFACE_ENDPOINTS = 11
#: Metrics the node scripts publish per fleet besides the agent's (scripts/node/health/act.py:
#: unhealthy nodes, nodes running by market; a reason series appears only when a node fails).
HEALTH_METRICS_PER_FLEET = 3
SIZES = ("min", "desired", "max")


@dataclass(frozen=True)
class Item:
    name: str
    detail: str
    hourly: dict[str, float]  # by size: min, desired, max
    source: str

    def as_dict(self) -> dict[str, object]:
        return {
            "item": self.name,
            "detail": self.detail,
            "hourly_usd": {k: round(v, 4) for k, v in self.hourly.items()},
            "monthly_usd": {k: round(v * HOURS_PER_MONTH, 2) for k, v in self.hourly.items()},
            "source": self.source,
        }


def _fixed(name: str, detail: str, usd: float, source: str) -> Item:
    return Item(name, detail, dict.fromkeys(SIZES, usd), source)


def _per_level(env: Environment, per_fleet: Callable[[Fleet, str], float]) -> dict[str, float]:
    """Hourly figures per level from each fleet's monthly figure at that level."""
    return {size: sum(per_fleet(f, size) for f in env.fleets) / HOURS_PER_MONTH for size in SIZES}


def _node_items(env: Environment, prices: PriceTable, usage: dict[str, Usage]) -> list[Item]:
    """EBS volumes and custom metrics, which follow the nodes' hours; a warm pool's stopped volumes."""
    gp3 = prices.service("ebs_gp3_gb_month")
    metric = prices.service("cloudwatch_metric_month")

    def gib(f: Fleet) -> int:
        return f.root_volume_gib + f.scratch_volume_gib

    def metrics(f: Fleet, size: str) -> float:
        node = metrics_per_node(get_instance_type(f.instance_types[0]).gpu_count, scratch=f.scratch_volume_gib > 0)
        fleet_wide = (len(metric_names()) + HEALTH_METRICS_PER_FLEET) * HOURS_PER_MONTH
        return (node * usage[f.name].instance_hours(size) + fleet_wide) * metric.usd / HOURS_PER_MONTH

    items = [
        Item(
            "EBS volumes",
            "gp3 root and scratch volumes of the running nodes",
            _per_level(env, lambda f, size: usage[f.name].instance_hours(size) * gib(f) * gp3.usd / HOURS_PER_MONTH),
            gp3.source,
        ),
        Item(
            "CloudWatch custom metrics",
            "agent and health metrics (estimate from the agent config)",
            _per_level(env, metrics),
            metric.source,
        ),
    ]
    pools = [f for f in env.fleets if f.warm_pool is not None]
    if pools:
        hourly = _per_level(env, lambda f, size: usage[f.name].warm_hours[size] * gib(f) * gp3.usd / HOURS_PER_MONTH)
        names = ", ".join(f.name for f in pools)
        items.append(Item("Warm pool volumes", f"gp3 volumes of the stopped instances ({names})", hourly, gp3.source))
    return items


def metrics_per_node(gpus: int, scratch: bool) -> int:
    """Custom metrics one node adds: each GPU measurement per GPU and per node (the node aggregation),
    memory and each disk path, each also aggregated per node."""
    disks = len(DEFAULT_DISK_PATHS) + (1 if scratch else 0)
    per_gpu = len(GPU_MEASUREMENTS) * (gpus + 1)
    return per_gpu + 2 * len(MEM_MEASUREMENTS) + len(DISK_MEASUREMENTS) * (disks + 1)


def count_alarms(assembly: Path) -> tuple[int, int] | None:
    """(metric alarms, composite alarms) in a synthesized environment's templates; None without one."""
    templates = sorted(assembly.glob("*.template.json")) if assembly.is_dir() else []
    if not templates:
        return None
    metric = composite = 0
    for path in templates:
        for resource in json.loads(path.read_text(encoding="utf-8")).get("Resources", {}).values():
            metric += resource.get("Type") == "AWS::CloudWatch::Alarm"
            composite += resource.get("Type") == "AWS::CloudWatch::CompositeAlarm"
    return metric, composite


def _load_balancers(env: Environment, prices: PriceTable) -> list[Item]:
    """One Application Load Balancer per served fleet (gpu_constructs/fleet/service_load_balancer.py), there
    at every size; an internet-facing one also holds a public IPv4 address in each of the environment's zones."""
    served = [f for f in env.fleets if f.service is not None]
    if not served:
        return []
    alb, ip = prices.service("application_load_balancer_hour"), prices.service("public_ipv4_hour")
    public = sum(1 for f in served if f.service is not None and not f.service.load_balancer.internal)  # for mypy
    zones = len(env.availability_zones)
    detail = f"{len(served)} Application Load Balancer{'s' if len(served) > 1 else ''}"
    if public:
        detail += f"; {public} internet-facing x at least {zones} public IPv4 addresses (more as it scales)"
    return [_fixed("Load balancers", detail, len(served) * alb.usd + public * zones * ip.usd, alb.source)]


def shared_items(
    env: Environment, prices: PriceTable, assembly: Path, usage: dict[str, Usage]
) -> tuple[list[Item], list[str]]:
    """The priced items and plain notes; ``usage``: each fleet's hours a month (``schedule.monthly_usage``)."""
    items: list[Item] = []
    notes: list[str] = []
    fs = env.storage.file_system
    key = fs.deployment_type.value
    if fs.deployment_type.persistent:
        key += f"/{fs.per_unit_storage_throughput}"
    rate = prices.service("fsx_lustre_gb_month", key)
    throughput = f", {fs.per_unit_storage_throughput} MB/s/TiB" if fs.per_unit_storage_throughput else ""
    items.append(
        _fixed(
            "FSx for Lustre",
            f"{fs.deployment_type.value}, {fs.storage_capacity_gib} GiB{throughput}",
            fs.storage_capacity_gib * rate.usd / HOURS_PER_MONTH,
            rate.source,
        )
    )
    if env.network.egress is EgressMode.NAT:
        nat, ip = prices.service("nat_gateway_hour"), prices.service("public_ipv4_hour")
        n = env.network.nat_gateways
        items.append(
            _fixed("NAT gateways", f"{n} x (gateway + its public IPv4 address)", n * (nat.usd + ip.usd), nat.source)
        )
    else:
        ep = prices.service("interface_endpoint_az_hour")
        zones = len(env.availability_zones)
        items.append(
            _fixed(
                "Interface endpoints",
                f"{INTERFACE_ENDPOINTS} endpoints x {zones} zones",
                INTERFACE_ENDPOINTS * zones * ep.usd,
                ep.source,
            )
        )
    items.extend(_load_balancers(env, prices))
    items.extend(_node_items(env, prices, usage))
    alarms = count_alarms(assembly)
    if alarms is None:
        notes.append(
            f"CloudWatch alarms not counted: no synthesized templates in {assembly}; run make synth ENV={env.name}"
        )
    else:
        standard, composite = (
            prices.service("cloudwatch_alarm_month"),
            prices.service("cloudwatch_composite_alarm_month"),
        )
        usd = (alarms[0] * standard.usd + alarms[1] * composite.usd) / HOURS_PER_MONTH
        items.append(
            _fixed("CloudWatch alarms", f"{alarms[0]} metric + {alarms[1]} composite alarms", usd, standard.source)
        )
    return items, notes
