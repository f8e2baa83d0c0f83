"""``cost --live``: the account's current Spot prices and Capacity Block offerings replace the table's.

Spot: ``DescribeSpotPriceHistory`` from now, Linux/UNIX, the newest price per instance type and
zone. Capacity Blocks: ``DescribeCapacityBlockOfferings`` for the fleet's type, count and window
length (whole days up to 14, then weeks, at most 182 days, as the API takes them); the cheapest
offering's ``UpfrontFee`` divided by its instance-hours is the price per instance-hour.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from config.schema import Environment
from ops.cost.prices import PriceTable

MAX_BLOCK_DAYS = 182


def block_duration_hours(start: datetime, end: datetime) -> int:
    """The window as a duration the API accepts: whole days up to 14, whole weeks above, capped at 182 days."""
    days = max(1, math.ceil((end - start).total_seconds() / 86400))
    if days > 14:
        days = 7 * math.ceil(days / 7)
    return 24 * min(days, MAX_BLOCK_DAYS)


def refresh(prices: PriceTable, env: Environment, ec2: Any, now: datetime | None = None) -> list[str]:
    """Fill ``prices.live_spot`` and ``prices.live_blocks`` from ``ec2``; notes for what was not found."""
    now = now or datetime.now(UTC)
    notes: list[str] = []
    spot_types = sorted({f.instance_types[0] for f in env.fleets if f.uses_spot})
    if spot_types:
        pages = ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=spot_types, ProductDescriptions=["Linux/UNIX"], StartTime=now
        )
        newest: dict[tuple[str, str], tuple[datetime, float]] = {}
        for page in pages:
            for row in page["SpotPriceHistory"]:
                key = (row["InstanceType"], row["AvailabilityZone"])
                if key not in newest or row["Timestamp"] > newest[key][0]:
                    newest[key] = (row["Timestamp"], float(row["SpotPrice"]))
        prices.live_spot.update({key: price for key, (_, price) in newest.items()})
        for fleet in env.fleets:
            name = fleet.instance_types[0]
            missing = [z for z in fleet.availability_zones if (name, z) not in newest] if fleet.uses_spot else []
            if missing:
                notes.append(
                    f"{fleet.name}: no live Spot price for {name} in {', '.join(missing)}: the table's figure is used"
                )
    for fleet in env.fleets:
        block = fleet.capacity_block
        if block is None:
            continue
        name = fleet.instance_types[0]
        hours = block_duration_hours(block.start, block.end)
        response = ec2.describe_capacity_block_offerings(
            InstanceType=name, InstanceCount=fleet.capacity.max, CapacityDurationHours=hours
        )
        offers = [
            float(o["UpfrontFee"]) / (o["InstanceCount"] * o["CapacityBlockDurationHours"])
            for o in response.get("CapacityBlockOfferings", [])
            if o.get("CurrencyCode", "USD") == "USD" and o.get("AvailabilityZone") in fleet.availability_zones
        ]
        if offers:
            prices.live_blocks[name] = min(offers)
        else:
            notes.append(f"{fleet.name}: no Capacity Block offering for {fleet.capacity.max} x {name} over {hours} h")
    prices.live_as_of = now.strftime("%Y-%m-%dT%H:%MZ")
    return notes
