"""The cost of one environment as one JSON document (``render`` prints it for people).

Hourly figures are the rate while a fleet runs its configured size (min, desired, max); monthly figures are
what the month spends: each fleet's hours at each size from its schedules (``schedule``), a Capacity Block's
window paid once (``blocks``), the shared items. Every figure resting on an estimate (the table's Spot
prices, a Capacity Block without a live offering, a Savings Plan's assumed discount) is flagged, and what is
not priced at all is listed in ``left_out``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config.fleets import Fleet, Scheduler
from config.schema import Environment
from ops.cost import mix
from ops.cost.blocks import block_cost
from ops.cost.commitments import commitment
from ops.cost.left_out import left_out
from ops.cost.prices import HOURS_PER_MONTH, PriceTable, check_region
from ops.cost.schedule import LEVELS, REFERENCE_YEAR, Usage, monthly_usage
from ops.cost.shared import Item, shared_items
from ops.cost.slurm import cpu_types, slurm_costs, slurm_fleet

#: What each estimate flag means, for the notes of the output.
ESTIMATES = {
    "spot": "Spot prices are estimates (the table's On-Demand x (1 - family discount), or an observed price of its "
    "date), not today's: --live replaces them with the account's DescribeSpotPriceHistory",
    "capacity_block": "Capacity Block prices are set when a block is bought: without --live (the account's "
    "DescribeCapacityBlockOfferings) a block is priced at On-Demand",
    "savings_plan": "Savings Plan figures use the table's assumed discount unless it holds the type's rate",
}


def _desired(fleet: Fleet) -> int:
    return fleet.capacity.desired if fleet.capacity.desired is not None else fleet.capacity.min


def _schedule(fleet: Fleet, usage: Usage) -> dict[str, Any] | None:
    if not usage.scheduled or fleet.scaling is None:
        return None
    return {
        "actions": [
            {"name": a.name, "cron": a.cron, "time_zone": a.time_zone, "min": a.min, "max": a.max, "desired": a.desired}
            for a in fleet.scaling.schedules
        ],
        "reference_year": REFERENCE_YEAR,
        "hours_per_month": {
            level: {str(n): round(h, 2) for n, h in sorted(usage.hours[level].items())} for level in LEVELS
        },
    }


#: Per level: (hourly, monthly), each {"all_on_demand", "planned"} in USD, unrounded, for the totals.
Money = dict[str, tuple[dict[str, float], dict[str, float]]]


def _levels(fleet: Fleet, rates: mix.FleetRates, usage: Usage) -> tuple[dict[str, Any], Money]:
    """Per level: the rate at the configured size and the month its usage gives; and the money unrounded."""
    sizes = {"min": fleet.capacity.min, "desired": _desired(fleet), "max": fleet.capacity.max}
    at: dict[str, Any] = {}
    money: Money = {}
    for level, count in sizes.items():
        priced = mix.price(fleet, count, rates)
        planned, all_on_demand = mix.monthly(fleet, usage.hours[level], rates)
        monthly = {"all_on_demand": all_on_demand, "planned": planned}
        money[level] = ({"all_on_demand": priced.all_on_demand, "planned": priced.planned}, monthly)
        at[level] = {
            **priced.as_dict(),
            "node_hours_per_month": round(usage.instance_hours(level), 2),
            "monthly_usd": {k: round(v, 2) for k, v in monthly.items()},
        }
    return at, money


def fleet_report(fleet: Fleet, prices: PriceTable, usage: Usage) -> tuple[dict[str, Any], Money]:
    """One fleet: the rate at each configured size, the month at each level, its block, its estimates; and
    its money per level unrounded."""
    rates = mix.rates(fleet, prices)
    at, money = _levels(fleet, rates, usage)
    desired = mix.price(fleet, _desired(fleet), rates)
    block = block_cost(fleet, prices)
    report = {
        "name": fleet.name,
        "role": fleet.role.value,
        # slurm: its month is a range, min..max (ops/cost/slurm.py), not its desired size all month.
        "scheduler": fleet.scheduler.value,
        "instance_type": rates.instance_type,
        "gpus": desired.gpus,
        "hourly_usd": {"all_on_demand": round(desired.all_on_demand, 4), "planned": round(desired.planned, 4)},
        "monthly_usd": at["desired"]["monthly_usd"],
        "usd_per_gpu_hour": at["desired"]["usd_per_gpu_hour"],
        "saving_percent": at["desired"]["saving_percent"],
        "unit_prices_usd": {
            "on_demand": rates.on_demand,
            "spot": round(rates.spot, 4),
            "capacity_block": round(rates.capacity_block, 4),
        },
        "estimates": {kind: kind in rates.estimates for kind in ("spot", "capacity_block")},
        "price_sources": dict(rates.sources),
        "at": at,
        "schedule": _schedule(fleet, usage),
        "capacity_block": block.as_dict() if block else None,
        "seed_promise": mix.seed_promise_note(fleet, desired),
        "notes": list(rates.notes),
    }
    return report, money


def _totals(fleets: list[dict[str, Any]], money: list[Money], items: list[Item]) -> dict[str, Any]:
    at = {}
    for level in LEVELS:
        hourly = {k: sum(m[level][0][k] for m in money) for k in ("all_on_demand", "planned")}
        monthly = {k: sum(m[level][1][k] for m in money) for k in ("all_on_demand", "planned")}
        for k in hourly:
            hourly[k] += sum(item.hourly[level] for item in items)
            monthly[k] += sum(item.hourly[level] * HOURS_PER_MONTH for item in items)
        at[level] = {
            "hourly_usd": {k: round(v, 4) for k, v in hourly.items()},
            "monthly_usd": {k: round(v, 2) for k, v in monthly.items()},
        }
    blocks = [f["capacity_block"] for f in fleets if f["capacity_block"]]
    return {
        "hourly_usd": at["desired"]["hourly_usd"],
        "monthly_usd": at["desired"]["monthly_usd"],
        "at": at,
        "capacity_blocks_once_usd": round(float(sum(b["total_usd"] for b in blocks)), 2),
    }


def _budget(env: Environment, total: dict[str, Any]) -> dict[str, Any] | None:
    """The planned month (at desired and at max) against the environment's AWS Budgets amount, where it has one."""
    if env.budget is None:
        return None
    amount = env.budget.monthly_usd
    planned = {level: total["at"][level]["monthly_usd"]["planned"] for level in ("desired", "max")}
    return {
        "monthly_usd": amount,
        "actual_percent": env.budget.actual_percent,
        "forecast_percent": env.budget.forecast_percent,
        "planned_percent": {level: round(100 * usd / amount, 1) for level, usd in planned.items()},
    }


def estimate(
    env: Environment,
    prices: PriceTable,
    assembly: Path,
    notes: list[str] | None = None,
    usage: dict[str, Usage] | None = None,
) -> dict[str, Any]:
    """``{"environment", "region", "prices", "fleets", "shared", "commitments", "total", "estimates", "slurm",
    "budget", "left_out", "notes"}``; money in USD. ``usage``: each fleet's ``monthly_usage``, followed here if None."""
    types = sorted({f.instance_types[0] for f in env.fleets})
    check_region(prices, types, any(f.uses_spot for f in env.fleets), cpu_types(env))
    usage = usage or {f.name: monthly_usage(f) for f in env.fleets}
    reports = [fleet_report(f, prices, usage[f.name]) for f in env.fleets]
    fleets = [report for report, _ in reports]
    items, shared_notes = shared_items(env, prices, assembly, usage)
    cluster = slurm_costs(env, prices, usage)
    items += cluster.items
    if cluster.section is not None:
        cluster.section["fleets"] = [
            slurm_fleet(f, report, usage[f.name])
            for f, report in zip(env.fleets, fleets, strict=True)
            if f.scheduler is Scheduler.SLURM
        ]
    shared = [item.as_dict() for item in items]
    commitments = [c for c in (commitment(f, usage[f.name], prices) for f in env.fleets) if c]
    flagged = {kind for f in fleets for kind, on in f["estimates"].items() if on}
    if any(p["estimate"] for c in commitments for p in c["plans"]):
        flagged.add("savings_plan")
    return {
        "environment": env.name,
        "region": env.region,
        "prices": {"source": prices.source, "as_of": prices.as_of},
        "fleets": fleets,
        "shared": shared,
        "commitments": commitments,
        "total": _totals(fleets, [money for _, money in reports], items),
        "hours_per_month": HOURS_PER_MONTH,
        "estimates": {kind: ESTIMATES[kind] for kind in sorted(flagged)},
        "slurm": cluster.section,
        "budget": _budget(env, _totals(fleets, [money for _, money in reports], items)),
        "left_out": [item.as_dict() for item in [*left_out(env), *cluster.left_out]],
        "notes": [*(notes or []), *shared_notes],
    }
