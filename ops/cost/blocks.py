"""A Capacity Block fleet's cost: its block's window, paid once, not a month of hours.

EC2 charges a Capacity Block's reservation fee up front, when the block is scheduled, at the rate prevailing
then, for the whole window whether instances run or not (https://aws.amazon.com/ec2/capacityblocks/pricing/;
the offering's ``UpfrontFee`` is "the total price to be paid up front", EC2 API Reference,
CapacityBlockOffering): instances x window hours x the block's rate. The group runs the block's
instances from 5 minutes after the window opens to an hour before it ends (``gpu_constructs/fleet/gpu_fleet.py``
BLOCK_START_DELAY and BLOCK_END_MARGIN; a test holds them equal), and their EBS volumes cost for those hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from config.fleets import Fleet
from ops.cost.prices import HOURS_PER_MONTH, Price, PriceTable

START_DELAY = timedelta(minutes=5)
END_MARGIN = timedelta(minutes=60)


@dataclass(frozen=True)
class BlockCost:
    fleet: str
    block_id: str
    start: str
    end: str
    window_hours: float
    running_hours: float
    instances: int
    rate: Price
    on_demand_usd: float
    volume_gib: int
    gp3_gib_month_usd: float

    @property
    def fee_usd(self) -> float:
        return self.instances * self.window_hours * self.rate.usd

    @property
    def volumes_usd(self) -> float:
        return self.instances * self.volume_gib * self.gp3_gib_month_usd * self.running_hours / HOURS_PER_MONTH

    @property
    def total_usd(self) -> float:
        return self.fee_usd + self.volumes_usd

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.block_id,
            "start": self.start,
            "end": self.end,
            "window_hours": round(self.window_hours, 2),
            "instances": self.instances,
            "usd_per_instance_hour": round(self.rate.usd, 4),
            "estimate": self.rate.estimate,
            "price_source": self.rate.source,
            "fee_usd": round(self.fee_usd, 2),
            "volumes_usd": round(self.volumes_usd, 2),
            "total_usd": round(self.total_usd, 2),
            "all_on_demand_usd": round(self.instances * self.running_hours * self.on_demand_usd, 2),
            "paid": "once, up front, for the whole window",
        }


def block_cost(fleet: Fleet, prices: PriceTable) -> BlockCost | None:
    """The block of ``fleet`` priced (its type's offering with --live, else On-Demand, flagged), or None."""
    block = fleet.capacity_block
    if block is None:
        return None
    name = fleet.instance_types[0]
    on_demand = prices.on_demand(name)
    found = prices.capacity_block(name)
    rate = found or Price(on_demand.usd, f"On-Demand ({on_demand.source}): no block price", on_demand.as_of, True)
    window = (block.end - block.start).total_seconds() / 3600
    running = max(0.0, (block.end - END_MARGIN - block.start - START_DELAY).total_seconds() / 3600)
    return BlockCost(
        fleet=fleet.name,
        block_id=block.id,
        start=block.start.isoformat(),
        end=block.end.isoformat(),
        window_hours=window,
        running_hours=running,
        instances=fleet.capacity.max,
        rate=rate,
        on_demand_usd=on_demand.usd,
        volume_gib=fleet.root_volume_gib + fleet.scratch_volume_gib,
        gp3_gib_month_usd=prices.service("ebs_gp3_gb_month").usd,
    )
