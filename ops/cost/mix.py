"""A fleet's instances split into On-Demand, Spot and reserved parts, and priced.

The split follows the group's ``InstancesDistribution``: the first ``on_demand_base_capacity``
instances are On-Demand, and of the instances above the base ``on_demand_percentage_above_base``
percent are On-Demand, the rest Spot. A fractional On-Demand count is rounded up (the estimate
errs toward the dearer side). A fleet with ``capacity_reservation`` runs its On-Demand part in
On-Demand Capacity Reservations, billed at the On-Demand rate; a Capacity Block fleet runs every
instance in the block, at the block's price.

Every instance is priced as the fleet's first instance type (its preference order); the output
names that type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from config.catalog import get_instance_type
from config.fleets.fleet import Fleet
from ops.cost.prices import PriceTable

#: What the platform expects of a Spot fleet: at least 70 % below On-Demand (AWS puts Spot at "up to 90 %" off
#: On-Demand prices, Amazon EC2 Spot Instances page; 70 % is where the shipped mixes stand with their estimates).
SEED_SPOT_SAVING = 0.70


@dataclass(frozen=True)
class Split:
    on_demand: int
    spot: int
    reserved: int  # On-Demand Capacity Reservations (billed at On-Demand)
    capacity_block: int

    @property
    def instances(self) -> int:
        return self.on_demand + self.spot + self.reserved + self.capacity_block


def split(fleet: Fleet, instances: int) -> Split:
    """The purchase options of ``instances`` running instances of ``fleet``."""
    if fleet.capacity_block is not None:
        return Split(0, 0, 0, instances)
    base = min(fleet.on_demand_base_capacity, instances)
    above = instances - base
    on_demand = base + math.ceil(above * fleet.on_demand_percentage_above_base / 100)
    spot = instances - on_demand
    if fleet.capacity_reservation is not None:
        return Split(0, spot, on_demand, 0)
    return Split(on_demand, spot, 0, 0)


@dataclass(frozen=True)
class Priced:
    """One fleet at one size: its parts in USD per hour."""

    split: Split
    gpus: int
    on_demand: float
    spot: float
    reserved: float
    capacity_block: float
    all_on_demand: float

    @property
    def planned(self) -> float:
        return self.on_demand + self.spot + self.reserved + self.capacity_block

    @property
    def per_gpu_hour(self) -> float | None:
        return self.planned / self.gpus if self.gpus else None

    @property
    def saving(self) -> float | None:
        """Fraction saved against the same instances all On-Demand; None with no instances."""
        return 1 - self.planned / self.all_on_demand if self.all_on_demand else None

    def as_dict(self) -> dict[str, object]:
        return {
            "instances": {
                "on_demand": self.split.on_demand,
                "spot": self.split.spot,
                "reserved": self.split.reserved,
                "capacity_block": self.split.capacity_block,
            },
            "gpus": self.gpus,
            "hourly_usd": {
                "all_on_demand": round(self.all_on_demand, 4),
                "planned": round(self.planned, 4),
                "on_demand": round(self.on_demand, 4),
                "spot": round(self.spot, 4),
                "reserved": round(self.reserved, 4),
                "capacity_block": round(self.capacity_block, 4),
            },
            "usd_per_gpu_hour": None if self.per_gpu_hour is None else round(self.per_gpu_hour, 4),
            "saving_percent": None if self.saving is None else round(100 * self.saving, 1),
        }


@dataclass(frozen=True)
class FleetRates:
    """The hourly prices of one instance of the fleet's first type, by purchase option, and which of them are
    estimates (``spot``, ``capacity_block``) with their sources."""

    instance_type: str
    gpus_per_instance: int
    on_demand: float
    spot: float
    capacity_block: float
    notes: tuple[str, ...]
    estimates: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()


def rates(fleet: Fleet, prices: PriceTable) -> FleetRates:
    name = fleet.instance_types[0]
    on_demand = prices.on_demand(name)
    notes, estimates, sources = [], [], [("on_demand", on_demand.source)]
    spot = on_demand.usd
    if fleet.uses_spot:
        found = prices.spot(name, fleet.availability_zones)
        spot = found.usd
        sources.append(("spot", found.source))
        if found.estimate:
            estimates.append("spot")
    block_rate = on_demand.usd
    if fleet.capacity_block is not None:
        block = prices.capacity_block(name)
        if block is None:
            notes.append(f"no Capacity Block price for {name}: priced at On-Demand; --live reads the current offerings")
        else:
            block_rate = block.usd
            sources.append(("capacity_block", block.source))
        if block is None or block.estimate:
            estimates.append("capacity_block")
    if len(fleet.instance_types) > 1:
        notes.append(f"priced as {name}, the first of {', '.join(fleet.instance_types)}")
    return FleetRates(
        name,
        get_instance_type(name).gpu_count,
        on_demand.usd,
        spot,
        block_rate,
        tuple(notes),
        tuple(estimates),
        tuple(sources),
    )


def price(fleet: Fleet, instances: int, r: FleetRates) -> Priced:
    s = split(fleet, instances)
    return Priced(
        split=s,
        gpus=instances * r.gpus_per_instance,
        on_demand=s.on_demand * r.on_demand,
        spot=s.spot * r.spot,
        reserved=s.reserved * r.on_demand,
        capacity_block=s.capacity_block * r.capacity_block,
        all_on_demand=instances * r.on_demand,
    )


def monthly(fleet: Fleet, hours: dict[int, float], r: FleetRates) -> tuple[float, float]:
    """(planned, all On-Demand) USD a month for ``hours`` a month at each instance count."""
    priced = [(price(fleet, n, r), h) for n, h in hours.items()]
    return sum(p.planned * h for p, h in priced), sum(p.all_on_demand * h for p, h in priced)


def seed_promise_note(fleet: Fleet, at_desired: Priced) -> str | None:
    """A plain sentence where a Spot fleet's mix cannot reach 70 % below On-Demand, else None."""
    if not fleet.uses_spot or at_desired.saving is None or at_desired.saving >= SEED_SPOT_SAVING:
        return None
    saved = (
        f"saves {100 * at_desired.saving:.0f} % against all On-Demand at desired capacity, "
        "short of the 70 % a Spot fleet should save (AWS: up to 90 %)"
    )
    on_demand = at_desired.split.on_demand + at_desired.split.reserved
    if on_demand == 0:
        return f"{saved}: the Spot price used is itself only {100 * at_desired.saving:.0f} % below On-Demand"
    return (
        f"{saved}: {on_demand} of {at_desired.split.instances} instances are On-Demand (on_demand_base_capacity "
        f"{fleet.on_demand_base_capacity}, on_demand_percentage_above_base {fleet.on_demand_percentage_above_base})"
    )
