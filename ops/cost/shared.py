"""What an environment pays besides its fleets' instances: FSx for Lustre, NAT gateways, interface
endpoints, the served fleets' load balancers, EBS volumes and CloudWatch metrics and alarms. Data
processing, transfer and load balancer capacity unit (LCU) charges depend on traffic and are left out
(the output says so).

Each item is priced at the fleets' min, desired and max sizes (EBS volumes and per-node metrics
follow the instance count; the rest is fixed).
"""

from __future__ import annotations

import json
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


def fleet_sizes(env: Environment) -> dict[str, list[tuple[Fleet, int]]]:
    """Per size, each fleet with its instance count (desired defaults to min, as the group does)."""
    return {
        "min": [(f, f.capacity.min) for f in env.fleets],
        "desired": [(f, f.capacity.desired if f.capacity.desired is not None else f.capacity.min) for f in env.fleets],
        "max": [(f, f.capacity.max) for f in env.fleets],
    }


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


def _load_balancers(env: Environment, prices: PriceTable, notes: list[str]) -> list[Item]:
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
    notes.append("load balancer capacity units (LCU-hours) depend on traffic and are not included")
    return [_fixed("Load balancers", detail, len(served) * alb.usd + public * zones * ip.usd, alb.source)]


def shared_items(env: Environment, prices: PriceTable, assembly: Path) -> tuple[list[Item], list[str]]:
    """The priced items and plain notes (what is left out, what is estimated)."""
    items: list[Item] = []
    notes = ["data processing and transfer (NAT, endpoints, FSx to S3) depend on traffic and are not included"]
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
    items.extend(_load_balancers(env, prices, notes))
    gp3 = prices.service("ebs_gp3_gb_month")
    metric = prices.service("cloudwatch_metric_month")
    ebs, metrics = {}, {}
    for size, fleets in fleet_sizes(env).items():
        gib = sum(n * (f.root_volume_gib + f.scratch_volume_gib) for f, n in fleets)
        ebs[size] = gib * gp3.usd / HOURS_PER_MONTH
        count = sum(
            n * metrics_per_node(get_instance_type(f.instance_types[0]).gpu_count, scratch=f.scratch_volume_gib > 0)
            + len(metric_names())
            + HEALTH_METRICS_PER_FLEET
            for f, n in fleets
        )
        metrics[size] = count * metric.usd / HOURS_PER_MONTH
    items.append(Item("EBS volumes", "gp3 root and scratch volumes of the running nodes", ebs, gp3.source))
    items.append(
        Item(
            "CloudWatch custom metrics",
            "agent and health metrics (estimate from the agent config)",
            metrics,
            metric.source,
        )
    )
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
