"""The cost of one environment as one JSON document and as rich tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from config.schema import Environment
from ops.cost import mix
from ops.cost.prices import HOURS_PER_MONTH, PriceTable
from ops.cost.shared import SIZES, shared_items


def _desired(fleet: Any) -> int:
    return fleet.capacity.desired if fleet.capacity.desired is not None else fleet.capacity.min


def estimate(env: Environment, prices: PriceTable, assembly: Path, notes: list[str] | None = None) -> dict[str, Any]:
    """``{"environment", "prices", "fleets", "shared", "total", "notes"}``; money in USD, hourly at desired."""
    notes = list(notes or [])
    fleets, totals = [], {size: {"all_on_demand": 0.0, "planned": 0.0} for size in SIZES}
    for fleet in env.fleets:
        rates = mix.rates(fleet, prices)
        sizes = {"min": fleet.capacity.min, "desired": _desired(fleet), "max": fleet.capacity.max}
        at = {size: mix.price(fleet, n, rates) for size, n in sizes.items()}
        for size, priced in at.items():
            totals[size]["all_on_demand"] += priced.all_on_demand
            totals[size]["planned"] += priced.planned
        desired = at["desired"]
        promise = mix.seed_promise_note(fleet, desired)
        fleets.append(
            {
                "name": fleet.name,
                "role": fleet.role.value,
                "instance_type": rates.instance_type,
                "gpus": desired.gpus,
                "hourly_usd": {"all_on_demand": round(desired.all_on_demand, 4), "planned": round(desired.planned, 4)},
                "monthly_usd": {
                    "all_on_demand": round(desired.all_on_demand * HOURS_PER_MONTH, 2),
                    "planned": round(desired.planned * HOURS_PER_MONTH, 2),
                },
                "usd_per_gpu_hour": desired.as_dict()["usd_per_gpu_hour"],
                "saving_percent": desired.as_dict()["saving_percent"],
                "unit_prices_usd": {
                    "on_demand": rates.on_demand,
                    "spot": round(rates.spot, 4),
                    "capacity_block": round(rates.capacity_block, 4),
                },
                "at": {size: priced.as_dict() for size, priced in at.items()},
                "seed_promise": promise,
                "notes": list(rates.notes),
            }
        )
    items, shared_notes = shared_items(env, prices, assembly)
    notes.extend(shared_notes)
    for item in items:
        for size in SIZES:
            totals[size]["all_on_demand"] += item.hourly[size]
            totals[size]["planned"] += item.hourly[size]

    def money(size: str, factor: float, digits: int) -> dict[str, float]:
        return {k: round(v * factor, digits) for k, v in totals[size].items()}

    return {
        "environment": env.name,
        "region": env.region,
        "prices": {"source": prices.source, "as_of": prices.as_of},
        "fleets": fleets,
        "shared": [item.as_dict() for item in items],
        "total": {
            "hourly_usd": money("desired", 1, 4),
            "monthly_usd": money("desired", HOURS_PER_MONTH, 2),
            "at": {
                size: {"hourly_usd": money(size, 1, 4), "monthly_usd": money(size, HOURS_PER_MONTH, 2)}
                for size in SIZES
            },
        },
        "hours_per_month": HOURS_PER_MONTH,
        "notes": notes,
    }


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def render(report: dict[str, Any], console: Console) -> None:
    prices = report["prices"]
    console.print(
        f"[bold]{report['environment']}[/] ({report['region']}), prices as of {prices['as_of']}: {prices['source']}"
    )
    table = Table(title="Fleets, USD (month = 730 h)")
    for column in (
        "fleet",
        "size",
        "OD/Spot/ODCR/CB",
        "GPUs",
        "all OD /h",
        "planned /h",
        "/GPU-h",
        "saving",
        "planned /month",
    ):
        table.add_column(column, justify="left" if column in ("fleet", "size") else "right")
    for fleet in report["fleets"]:
        table.add_section()
        for size, at in fleet["at"].items():
            n, h = at["instances"], at["hourly_usd"]
            saving = "-" if at["saving_percent"] is None else f"{at['saving_percent']:.0f} %"
            table.add_row(
                fleet["name"] if size == "min" else "",
                size,
                f"{n['on_demand']}/{n['spot']}/{n['reserved']}/{n['capacity_block']}",
                str(at["gpus"]),
                _usd(h["all_on_demand"]),
                _usd(h["planned"]),
                _usd(at["usd_per_gpu_hour"]),
                saving,
                _usd(h["planned"] * report["hours_per_month"]),
            )
    console.print(table)
    for fleet in report["fleets"]:
        console.print(
            f"{fleet['name']}: {fleet['role']}, {fleet['instance_type']} (OD On-Demand, ODCR On-Demand Capacity Reservation, CB Capacity Block)",
            soft_wrap=True,
        )
    shared = Table(title="Shared, USD at desired size")
    for column in ("item", "detail", "/h", "/month"):
        shared.add_column(column, justify="right" if column.startswith("/") else "left")
    for item in report["shared"]:
        shared.add_row(
            item["item"], item["detail"], _usd(item["hourly_usd"]["desired"]), _usd(item["monthly_usd"]["desired"])
        )
    console.print(shared)
    for item in report["shared"]:
        console.print(f"source of {item['item']}: {item['source']}", soft_wrap=True)
    for size, at in report["total"]["at"].items():
        console.print(
            f"[bold]total at {size}[/]: {_usd(at['hourly_usd']['planned'])}/h, {_usd(at['monthly_usd']['planned'])}/month "
            f"(all On-Demand {_usd(at['monthly_usd']['all_on_demand'])}/month)"
        )
    for fleet in report["fleets"]:
        if fleet["seed_promise"]:
            console.print(f"[yellow]{fleet['name']}: {fleet['seed_promise']}[/]", soft_wrap=True)
        for note in fleet["notes"]:
            console.print(f"{fleet['name']}: {note}", soft_wrap=True)
    for note in report["notes"]:
        console.print(f"note: {note}", soft_wrap=True)
