"""vCPU quotas: On-Demand and Spot, per instance class, for each fleet's maximum and for all fleets together.

EC2 counts running On-Demand and Spot instances in vCPUs per class of families; the GPU
classes have their own quotas (Service Quotas, service code ``ec2``), often 0 in a new account.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from config.catalog import get_instance_type
from config.fleets import Fleet
from config.schema import Environment
from ops.findings import Finding, Level
from ops.preflight.aws import Aws


@dataclass(frozen=True)
class Quota:
    code: str
    name: str


#: (class, market) -> quota. P: every p family; G: the g families (and VT, which the catalog does not list).
QUOTAS = {
    ("P", "on-demand"): Quota("L-417A185B", "Running On-Demand P instances"),
    ("G", "on-demand"): Quota("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("P", "spot"): Quota("L-7212CCBC", "All P Spot Instance Requests"),
    ("G", "spot"): Quota("L-3819A6DF", "All G and VT Spot Instance Requests"),
}


def quota_class(instance_type: str) -> str | None:
    """``P`` for p4d.24xlarge, ``G`` for g5.xlarge; None for a family no GPU quota here covers."""
    first = instance_type[0].upper()
    return first if first in ("P", "G") else None


def market_counts(fleet: Fleet) -> dict[str, int]:
    """Instances of each market at the fleet's maximum, each at its worst case: the On-Demand base plus the
    On-Demand share above it (rounded up), and the Spot share (rounded up)."""
    above = fleet.capacity.max - min(fleet.on_demand_base_capacity, fleet.capacity.max)
    pct = fleet.on_demand_percentage_above_base
    on_demand = min(fleet.capacity.max, fleet.on_demand_base_capacity + math.ceil(above * pct / 100))
    spot = math.ceil(above * (100 - pct) / 100)
    return {"on-demand": on_demand, "spot": spot}


def fleet_needs(fleet: Fleet) -> dict[tuple[str, str], int]:
    """vCPUs per (class, market) the fleet may run at its maximum: each instance at the largest type
    of its class in the fleet (the group may launch any of them)."""
    needs: dict[tuple[str, str], int] = {}
    classes: dict[str, int] = {}
    for name in fleet.instance_types:
        klass = quota_class(name)
        if klass is not None:
            classes[klass] = max(classes.get(klass, 0), get_instance_type(name).vcpus)
    for market, count in market_counts(fleet).items():
        for klass, vcpus in classes.items():
            if count:
                needs[(klass, market)] = count * vcpus
    return needs


def check_vcpu_quotas(env: Environment, aws: Aws) -> list[Finding]:
    """Each fleet's maximum fits each quota (ERROR), and so do all fleets at their maximum together (WARNING)."""
    findings = []
    totals: dict[tuple[str, str], int] = {}
    per_fleet: list[tuple[Fleet, dict[tuple[str, str], int]]] = []
    for fleet in env.fleets:
        if fleet.capacity_block is not None:
            findings.append(
                Finding(
                    "vcpu-quotas",
                    Level.INFO,
                    f"fleet {fleet.name}: runs in its Capacity Block (purchased capacity), not counted here",
                )
            )
            continue
        needs = fleet_needs(fleet)
        per_fleet.append((fleet, needs))
        for key, vcpus in needs.items():
            totals[key] = totals.get(key, 0) + vcpus
    values = {key: aws.quota("ec2", QUOTAS[key].code) or 0.0 for key in totals}
    for fleet, needs in per_fleet:
        for key, vcpus in needs.items():
            quota = QUOTAS[key]
            if vcpus > values[key]:
                findings.append(
                    Finding(
                        "vcpu-quotas",
                        Level.ERROR,
                        f"fleet {fleet.name} at max ({fleet.capacity.max}) needs {vcpus} vCPUs of "
                        f"'{quota.name}' ({quota.code}); the quota is {values[key]:g}",
                        f"request {quota.code} >= {vcpus} in Service Quotas (ec2, {env.region}), or lower "
                        f"fleets[{fleet.name}].capacity.max",
                    )
                )
    for key, vcpus in totals.items():
        quota = QUOTAS[key]
        alone = any(needs.get(key, 0) > values[key] for _, needs in per_fleet)
        if vcpus > values[key] and not alone:
            findings.append(
                Finding(
                    "vcpu-quotas",
                    Level.WARNING,
                    f"all fleets at max need {vcpus} vCPUs of '{quota.name}' ({quota.code}); the quota is {values[key]:g}",
                    f"request {quota.code} >= {vcpus}, or suppress vcpu-quotas if the fleets never peak together",
                )
            )
        elif vcpus <= values[key]:
            findings.append(
                Finding(
                    "vcpu-quotas",
                    Level.INFO,
                    f"'{quota.name}' ({quota.code}): {values[key]:g} vCPUs cover the fleets' {vcpus} at max "
                    "(other instances of the account count too)",
                )
            )
    return findings
