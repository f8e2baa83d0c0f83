"""What an environment's Slurm cluster on AWS PCS costs besides its fleets' instances, and how a Slurm fleet's
instances are counted.

- The cluster's controller, per hour by cluster size, and PCS's managed Slurm accounting (``slurm.accounting``),
  per hour by cluster size: both run every hour the cluster exists, jobs or none.
- The login nodes: ``slurm.login.count`` On-Demand CPU instances, every hour.
- PCS's fee per instance-hour of the nodes it manages (login and compute), where its pricing page lists one.
- A Slurm fleet's instances: PCS starts nodes when jobs wait in the fleet's queue and stops them after
  ``slurm.scale_down_idle_seconds`` idle, so a month of them costs between ``capacity.min`` x 730 h (idle) and
  ``capacity.max`` x 730 h (every node busy all month). A Slurm fleet has no desired size: the totals count it at
  its min under "desired".

The PCS figures are AWS's list prices (``pcs`` in ``prices.yaml``, with their source and date); one not written
yet (null) is not priced: it is listed in ``left_out`` with the pricing page, and left out of the totals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.fleets import Fleet
from config.schema import Environment
from config.slurm import Slurm
from ops.cost.blocks import block_cost
from ops.cost.left_out import LeftOut
from ops.cost.prices import HOURS_PER_MONTH, Price, PriceTable
from ops.cost.schedule import Usage
from ops.cost.shared import SIZES, Item

PCS_PRICING = "https://aws.amazon.com/pcs/pricing/"
#: What the table and the JSON say of a Slurm fleet's month.
ELASTIC = (
    "PCS starts a Slurm fleet's nodes when jobs wait in its queue and stops them after "
    "slurm.scale_down_idle_seconds idle, so its month costs between min (capacity.min x 730 h, idle) and max "
    "(capacity.max x 730 h, every node busy), not desired x 730 h; the totals count it at min under desired"
)


@dataclass
class SlurmCosts:
    """The cluster's priced items (shown with the shared ones, counted in the totals), what is not priced, and
    the ``slurm`` section of ``cost --json`` (None without a ``slurm:`` section)."""

    items: list[Item] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    section: dict[str, Any] | None = None
    #: The PCS figures the table does not hold yet (among ``left_out``).
    not_written: list[str] = field(default_factory=list)

    def not_yet(self, name: str, what: str, where: str) -> None:
        self.not_written.append(name)
        self.left_out.append(
            LeftOut(
                name,
                f"{what}; ops/cost/prices.yaml has no figure yet: write {where} (USD per hour) and its as_of",
                PCS_PRICING,
            )
        )


def cpu_types(env: Environment) -> list[str]:
    """The CPU instance types the environment runs (its login nodes), which the price table must hold."""
    return [env.slurm.login.instance_type] if env.slurm is not None else []


def pcs_price(prices: PriceTable, key: str, size: str | None = None) -> Price | None:
    """A PCS list price of the table (``pcs.<region>.<key>[.<size>]``), or None where it is not written yet."""
    pcs = prices.data.get("pcs") or {}
    value = (pcs.get(prices.region) or {}).get(key)
    if size is not None:
        value = (value or {}).get(size)
    if value is None:
        return None
    return Price(float(value), str(pcs["source"]), str(pcs.get("as_of")))


def _block_node_hours(fleets: list[Fleet], prices: PriceTable) -> float:
    """Instance-hours the Slurm fleets run in their Capacity Blocks (once, in the window, not every month)."""
    blocks = [block_cost(f, prices) for f in fleets]
    return sum(b.instances * b.running_hours for b in blocks if b is not None)


def slurm_costs(env: Environment, prices: PriceTable, usage: dict[str, Usage]) -> SlurmCosts:
    """The Slurm cluster's items, what of it is not priced, and its section; ``usage``: each fleet's month."""
    slurm = env.slurm
    if slurm is None:
        return SlurmCosts()
    login = slurm.login
    login_price = prices.cpu_on_demand(login.instance_type)
    fleets = env.slurm_fleets
    # The nodes PCS manages, a month: the Slurm fleets' (a Capacity Block fleet's run in its window) and the login's.
    managed = {
        level: sum(usage[f.name].instance_hours(level) for f in fleets) + login.count * HOURS_PER_MONTH
        for level in SIZES
    }
    costs = SlurmCosts()
    costs.items.append(
        Item(
            "Slurm login nodes",
            f"{login.count} x {login.instance_type} On-Demand (slurm.login), every hour",
            dict.fromkeys(SIZES, login.count * login_price.usd),
            login_price.source,
        )
    )
    hourly: dict[str, float | None] = {"login_nodes": login.count * login_price.usd}
    hourly.update(_cluster_parts(slurm, prices, costs))
    hourly["node_management_per_instance"] = _node_fee(prices, managed, costs)
    if slurm.accounting:
        costs.left_out.append(
            LeftOut(
                "PCS Slurm accounting storage",
                "per GB-month of the job records PCS keeps: depends on the jobs and how long records are kept",
                PCS_PRICING,
            )
        )
    costs.section = _section(slurm, prices, hourly, managed, costs, fleets)
    return costs


def _cluster_parts(slurm: Any, prices: PriceTable, costs: SlurmCosts) -> dict[str, float | None]:
    """The controller and (with accounting) its accounting, per hour by cluster size: items, or not priced."""
    size, region = slurm.cluster_size.value, prices.region
    hourly: dict[str, float | None] = {}
    parts = [("controller", "controller_hour", "PCS cluster controller", "the cluster's Slurm controller")]
    if slurm.accounting:
        parts.append(("accounting", "accounting_hour", "PCS Slurm accounting", "its managed Slurm accounting"))
    for part, key, name, what in parts:
        price = pcs_price(prices, key, size)
        hourly[part] = None if price is None else price.usd
        if price is None:
            why = f"AWS PCS charges {what} per hour by cluster size"
            costs.not_yet(f"{name} ({size})", why, f"pcs.{region}.{key}.{size}")
        else:
            fixed = dict.fromkeys(SIZES, price.usd)
            costs.items.append(Item(f"{name} ({size})", f"{what}, every hour (list price)", fixed, price.source))
    return hourly


def _node_fee(prices: PriceTable, managed: dict[str, float], costs: SlurmCosts) -> float | None:
    """PCS's fee per managed instance-hour, where the price table has one: an item, or not priced."""
    fee = pcs_price(prices, "node_management_instance_hour")
    if fee is None:
        what = "a fee per instance-hour of the nodes PCS manages, where AWS PCS's pricing page lists one"
        where = f"pcs.{prices.region}.node_management_instance_hour (0 if the page lists none)"
        costs.not_yet("PCS node management", what, where)
        return None
    if fee.usd > 0:
        detail = (
            f"per instance-hour of the nodes PCS manages: {managed['min']:,.0f} (min) to {managed['max']:,.0f} (max) "
            "node-h a month, login included (list price)"
        )
        monthly = {k: fee.usd * h / HOURS_PER_MONTH for k, h in managed.items()}
        costs.items.append(Item("PCS node management", detail, monthly, fee.source))
    return fee.usd


def _section(
    slurm: Slurm,
    prices: PriceTable,
    hourly: dict[str, float | None],
    managed: dict[str, float],
    costs: SlurmCosts,
    fleets: list[Fleet],
) -> dict[str, Any]:
    pcs = prices.data.get("pcs") or {}
    fee = hourly["node_management_per_instance"]
    block_hours = _block_node_hours(fleets, prices)
    return {
        "cluster_size": slurm.cluster_size.value,
        "nodes_managed_at_most": slurm.node_limit,
        "accounting": slurm.accounting,
        "list_prices": True,
        "prices": {"source": pcs.get("source"), "as_of": pcs.get("as_of")},
        "usd_per_hour": {k: None if v is None else round(v, 4) for k, v in hourly.items()},
        "managed_node_hours_per_month": {level: round(managed[level], 2) for level in ("min", "max")},
        # The cluster's own month (controller, accounting, login nodes, node fee): its priced parts only.
        "monthly_usd": {
            level: round(sum(item.hourly[level] for item in costs.items) * HOURS_PER_MONTH, 2)
            for level in ("min", "max")
        },
        "capacity_blocks_node_management_once_usd": None if fee is None else round(fee * block_hours, 2),
        "not_priced": list(costs.not_written),
        "fleets": [],  # filled by the report from each fleet's levels (slurm_fleet)
        "note": ELASTIC,
    }


def slurm_fleet(fleet: Fleet, report: dict[str, Any], usage: Usage) -> dict[str, Any]:
    """A Slurm fleet's month as a range: min and max nodes, their node-hours and what they cost (a Capacity Block
    fleet's instances are its block's, paid once)."""
    block = fleet.capacity_block is not None
    levels = ("min", "max")
    return {
        "name": fleet.name,
        "queue": fleet.name,
        "min_nodes": fleet.capacity.min,
        "max_nodes": fleet.capacity.max,
        "node_hours_per_month": {level: round(usage.instance_hours(level), 2) for level in levels},
        "monthly_usd": None if block else {level: report["at"][level]["monthly_usd"]["planned"] for level in levels},
        "capacity_block": block,
    }
