"""``cost`` for people: the report of ``report.estimate`` as rich tables and lines.

A figure that rests on an estimate carries ``~`` (the legend under the tables says which estimate); a fleet
run by schedules shows its node-hours a month; a Capacity Block shows its window, paid once; what is not
priced is listed last.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

COLUMNS = ("fleet", "size", "OD/Spot/ODCR/CB", "GPUs", "all OD/h", "planned/h", "/GPU-h", "saving", "node-h/mo",
           "planned/mo")  # fmt: skip


def usd(value: float | None, estimate: bool = False) -> str:
    return "-" if value is None else f"{'~' if estimate else ''}${value:,.2f}"


def _uses_estimate(fleet: dict[str, Any], at: dict[str, Any]) -> bool:
    n = at["instances"]
    return (fleet["estimates"]["spot"] and n["spot"] > 0) or (
        fleet["estimates"]["capacity_block"] and n["capacity_block"] > 0
    )


#: A Slurm fleet's rows: no desired size (PCS starts nodes for waiting jobs), min idle and max busy.
SLURM_SIZES = {"min": "min (idle)", "max": "max (busy)"}


def _fleet_rows(table: Table, fleet: dict[str, Any]) -> None:
    table.add_section()
    for size, at in fleet["at"].items():
        slurm = fleet["scheduler"] == "slurm"
        if slurm and size not in SLURM_SIZES:
            continue
        n, h, guess = at["instances"], at["hourly_usd"], _uses_estimate(fleet, at)
        block = fleet["capacity_block"] is not None
        table.add_row(
            fleet["name"] if size == "min" else "",
            SLURM_SIZES[size] if slurm else size,
            f"{n['on_demand']}/{n['spot']}/{n['reserved']}/{n['capacity_block']}",
            str(at["gpus"]),
            usd(h["all_on_demand"]),
            usd(h["planned"], guess),
            usd(at["usd_per_gpu_hour"], guess),
            "-" if at["saving_percent"] is None else f"{at['saving_percent']:.0f} %",
            "block" if block else f"{at['node_hours_per_month']:,.0f}",
            "see block" if block else usd(at["monthly_usd"]["planned"], guess),
        )


def _fleet_lines(fleet: dict[str, Any], console: Console) -> None:
    name = fleet["name"]
    schedule = fleet["schedule"]
    if schedule:
        actions = ", ".join(f"{a['name']} ({a['cron']}, {a['time_zone']})" for a in schedule["actions"])
        hours = ", ".join(f"{n} nodes {h:,.0f} h" for n, h in schedule["hours_per_month"]["desired"].items())
        console.print(f"{name}: scheduled by {actions}: at desired {hours} a month", soft_wrap=True)
    block = fleet["capacity_block"]
    if block:
        console.print(
            f"{name}: Capacity Block {block['id']} {block['start']} to {block['end']}: {block['instances']} x "
            f"{fleet['instance_type']} x {block['window_hours']:g} h x {usd(block['usd_per_instance_hour'])} = "
            f"{usd(block['fee_usd'], block['estimate'])} paid once, up front (+ {usd(block['volumes_usd'])} EBS "
            f"while it runs); all On-Demand for its running hours {usd(block['all_on_demand_usd'])}",
            soft_wrap=True,
        )
    if fleet["scheduler"] == "slurm" and not block:
        at, guess = fleet["at"], fleet["estimates"]["spot"]
        month = " to ".join(
            f"{usd(at[level]['monthly_usd']['planned'], guess and level == 'max')} "
            f"{'idle at min' if level == 'min' else 'busy at max'} ({at[level]['node_hours_per_month']:,.0f} node-h)"
            for level in SLURM_SIZES
        )
        console.print(f"{name}: Slurm queue on AWS PCS: {month} a month", soft_wrap=True)
    if fleet["seed_promise"]:
        console.print(f"[yellow]{name}: {escape(fleet['seed_promise'])}[/]", soft_wrap=True)
    for note in fleet["notes"]:
        console.print(f"{name}: {escape(note)}", soft_wrap=True)


def _shared(report: dict[str, Any], console: Console) -> None:
    shared = Table(title="Shared, USD at desired level")
    for column in ("item", "detail", "/h", "/month"):
        shared.add_column(column, justify="right" if column.startswith("/") else "left")
    for item in report["shared"]:
        shared.add_row(
            item["item"], item["detail"], usd(item["hourly_usd"]["desired"]), usd(item["monthly_usd"]["desired"])
        )
    console.print(shared)
    for item in report["shared"]:
        console.print(f"source of {item['item']}: {item['source']}", soft_wrap=True)


def _slurm_cluster(report: dict[str, Any], console: Console) -> None:
    cluster = report.get("slurm")
    if not cluster:
        return
    hours = cluster["managed_node_hours_per_month"]
    missing = f"; not priced yet: {', '.join(cluster['not_priced'])}" if cluster["not_priced"] else ""
    once = cluster["capacity_blocks_node_management_once_usd"]
    missing = (f"; plus {usd(once)} node fee once, in the Capacity Blocks" if once else "") + missing
    console.print(
        f"Slurm cluster (AWS PCS, {cluster['cluster_size']}, list prices of {cluster['prices']['as_of'] or 'no date yet'}): "
        f"{usd(cluster['monthly_usd']['min'])} to {usd(cluster['monthly_usd']['max'])} a month for the controller, "
        f"accounting, login nodes and node fee as priced ({hours['min']:,.0f} to {hours['max']:,.0f} managed node-h)"
        f"{missing}",
        soft_wrap=True,
    )


def _commitments(report: dict[str, Any], console: Console) -> None:
    for c in report["commitments"]:
        plans = "; ".join(
            f"{p['plan']} {usd(p['commitment_usd_per_hour'], p['estimate'])}/h: "
            f"{usd(p['monthly_usd'], p['estimate'])}/month" + (" (assumed discount)" if p["estimate"] else "")
            for p in c["plans"]
        )
        console.print(
            f"commitment view, {c['fleet']}: {c['instances']} x {c['instance_type']} On-Demand every hour, "
            f"{usd(c['on_demand_monthly_usd'])}/month; {plans}",
            soft_wrap=True,
        )


def _budget(report: dict[str, Any], console: Console) -> None:
    budget = report.get("budget")
    if not budget:
        return
    share = budget["planned_percent"]
    first = min(budget["actual_percent"], default=100)
    over = " [red]past its first notification[/]" if share["desired"] >= first else ""
    console.print(
        f"[bold]budget[/]: {usd(budget['monthly_usd'])}/month (AWS Budgets, the whole account); the planned month is "
        f"{share['desired']} % of it at desired, {share['max']} % at max{over}",
        soft_wrap=True,
    )


def render(report: dict[str, Any], console: Console) -> None:
    prices = report["prices"]
    console.print(
        f"[bold]{report['environment']}[/] ({report['region']}), prices as of {prices['as_of']}: "
        f"{escape(prices['source'])}",
        soft_wrap=True,
    )
    table = Table(title="Fleets, USD: /h while at that size; /mo as the schedules spend it (mo = 730 h)")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("fleet", "size") else "right", no_wrap=True)
    for fleet in report["fleets"]:
        _fleet_rows(table, fleet)
    console.print(table)
    console.print("OD On-Demand, ODCR On-Demand Capacity Reservation, CB Capacity Block", soft_wrap=True)
    if report.get("slurm"):
        console.print(f"Slurm fleets: {escape(report['slurm']['note'])}", soft_wrap=True)
    for fleet in report["fleets"]:
        _fleet_lines(fleet, console)
    _shared(report, console)
    guess = bool(report["estimates"])
    for size, at in report["total"]["at"].items():
        console.print(
            f"[bold]total at {size}[/]: {usd(at['hourly_usd']['planned'], guess)}/h, "
            f"{usd(at['monthly_usd']['planned'], guess)}/month (all On-Demand {usd(at['monthly_usd']['all_on_demand'])}"
            "/month)"
        )
    once = report["total"]["capacity_blocks_once_usd"]
    if once:
        console.print(f"[bold]plus Capacity Blocks[/]: {usd(once, 'capacity_block' in report['estimates'])} once")
    _slurm_cluster(report, console)
    _budget(report, console)
    _commitments(report, console)
    for kind, text in report["estimates"].items():
        console.print(f"[yellow]~ estimate ({kind}): {escape(text)}[/]", soft_wrap=True)
    for item in report["left_out"]:
        console.print(f"not priced: {item['item']}: {escape(item['why'])} ({item['pricing']})", soft_wrap=True)
    for note in report["notes"]:
        console.print(f"note: {escape(note)}", soft_wrap=True)
