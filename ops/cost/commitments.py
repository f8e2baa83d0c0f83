"""The commitment view: what the instances a fleet runs On-Demand every hour of the month would cost under
a Savings Plan.

Only instances On-Demand all month qualify (a commitment is paid every hour whether used or not): the
On-Demand and Capacity Reservation part of the fleet at the lowest size its schedules ever give it. Spot and
Capacity Block instances are left out, as Savings Plans do not apply to them; they do apply to On-Demand
Capacity Reservations (EC2 User Guide, "Capacity Reservation pricing and billing": "Billing discounts for
Savings Plans and Regional Reserved Instances apply to Capacity Reservations").
"""

from __future__ import annotations

from typing import Any

from config.fleets import Fleet
from ops.cost import mix
from ops.cost.prices import HOURS_PER_MONTH, PriceTable
from ops.cost.schedule import Usage


def always_on_demand(fleet: Fleet, usage: Usage) -> int:
    """On-Demand (and ODCR) instances the fleet runs in every hour of the month."""
    counts = [n for n, hours in usage.hours["min"].items() if hours > 0]
    if fleet.capacity_block is not None or not counts:
        return 0
    lowest = mix.split(fleet, min(counts))
    return lowest.on_demand + lowest.reserved


def commitment(fleet: Fleet, usage: Usage, prices: PriceTable) -> dict[str, Any] | None:
    """The fleet's always-on On-Demand instances priced On-Demand and under each plan of the table."""
    instances = always_on_demand(fleet, usage)
    if instances == 0:
        return None
    name = fleet.instance_types[0]
    on_demand = instances * prices.on_demand(name).usd * HOURS_PER_MONTH
    plans = []
    for plan, rate in prices.savings_plans(name):
        monthly = instances * rate.usd * HOURS_PER_MONTH
        plans.append(
            {
                "plan": plan,
                "commitment_usd_per_hour": round(instances * rate.usd, 4),
                "monthly_usd": round(monthly, 2),
                "saving_usd_per_month": round(on_demand - monthly, 2),
                "estimate": rate.estimate,
                "source": rate.source,
            }
        )
    return {
        "fleet": fleet.name,
        "instance_type": name,
        "instances": instances,
        "on_demand_monthly_usd": round(on_demand, 2),
        "plans": plans,
    }
