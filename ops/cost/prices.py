"""The checked-in price table: ``prices.yaml`` next to this file plus the catalog's On-Demand column.

Every ``Price`` says whether it is an estimate: the table's Spot figures (On-Demand times a family discount,
or an observed price of some past day), a Capacity Block without a live offering (priced at On-Demand) and a
Savings Plan at an assumed discount are; ``--live`` replaces Spot and Capacity Block figures with the
account's. A region other than the catalog's is priced from its own sections of the table, or refused in one
line that names the sections to add (``check_region``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.catalog import load_catalog
from config.loader import ConfigError, display_path, read_mapping

PRICES_PATH = Path(__file__).resolve().parent / "prices.yaml"
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Price:
    """One figure of the table and where it comes from."""

    usd: float
    source: str
    as_of: str | None
    estimate: bool = False


@dataclass
class PriceTable:
    region: str
    data: dict[str, Any]
    path: Path = PRICES_PATH
    #: --live results: (instance type, zone) -> Spot price; instance type -> Capacity Block hourly price.
    live_spot: dict[tuple[str, str], float] = field(default_factory=dict)
    live_blocks: dict[str, float] = field(default_factory=dict)
    live_as_of: str | None = None

    def _problem(self, where: str, text: str) -> ConfigError:
        return ConfigError([f"{display_path(self.path)}: {where}: {text}"])

    @property
    def source(self) -> str:
        live = f"; Spot and Capacity Blocks live from the account at {self.live_as_of}" if self.live_as_of else ""
        return f"{display_path(self.path)} and {self.data['on_demand']['source']}{live}"

    @property
    def as_of(self) -> str:
        """The oldest date of the figures the table holds (the On-Demand column's, today)."""
        dates = [self.data["on_demand"]["as_of"], self.data["spot"]["as_of"]]
        return min(str(d) for d in dates if d)

    def on_demand(self, instance_type: str) -> Price:
        od = self.data["on_demand"]
        if self.region != od["region"]:
            other = (od.get("regions") or {}).get(self.region) or {}
            usd = (other.get("prices") or {}).get(instance_type)
            if usd is None:
                raise self._problem(
                    f"on_demand.regions.{self.region}.prices.{instance_type}",
                    "missing; fix: add its On-Demand price (https://aws.amazon.com/ec2/pricing/on-demand/)",
                )
            return Price(float(usd), str(other.get("source", od["source"])), str(other.get("as_of", od["as_of"])))
        price = load_catalog()[instance_type].on_demand_usd_per_hour
        if price is None:
            raise ConfigError(
                [
                    f"config/catalog/gpu_instances.csv: {instance_type}.on_demand_usd_per_hour: empty; "
                    "fix: write its On-Demand price (config/catalog/SOURCES.md says how)"
                ]
            )
        return Price(price, od["source"], str(od["as_of"]))

    def cpu_on_demand(self, instance_type: str) -> Price:
        """A CPU instance type's On-Demand price (the Slurm login nodes): ``on_demand_cpu.<region>`` of the table."""
        cpu = self.data.get("on_demand_cpu") or {}
        usd = (cpu.get(self.region) or {}).get(instance_type)
        if usd is None:
            raise self._problem(
                f"on_demand_cpu.{self.region}.{instance_type}",
                "missing; fix: add its On-Demand price (https://aws.amazon.com/ec2/pricing/on-demand/)",
            )
        return Price(float(usd), str(cpu["source"]), str(cpu["as_of"]))

    def missing_for(self, instance_types: list[str], spot: bool, cpu_types: Sequence[str] = ()) -> list[str]:
        """The sections this region lacks to price ``instance_types`` (and Spot, when ``spot``; the CPU types
        ``cpu_types`` and AWS PCS's figures, when given: an environment with a Slurm cluster)."""
        missing = []
        if cpu_types:
            known = ((self.data.get("on_demand_cpu") or {}).get(self.region)) or {}
            absent = [t for t in cpu_types if t not in known]
            if absent:
                missing.append(f"on_demand_cpu.{self.region} ({', '.join(absent)})")
            if self.region not in (self.data.get("pcs") or {}):
                missing.append(f"pcs.{self.region}")
        od = self.data["on_demand"]
        if self.region != od["region"]:
            prices = ((od.get("regions") or {}).get(self.region) or {}).get("prices") or {}
            absent = [t for t in instance_types if t not in prices]
            if absent:
                missing.append(f"on_demand.regions.{self.region}.prices ({', '.join(absent)})")
        if spot and self.region not in self.data["spot"]:
            missing.append(f"spot.{self.region}")
        if self.region not in self.data["services"]:
            missing.append(f"services.{self.region}")
        return missing

    def spot(self, instance_type: str, zones: list[str]) -> Price:
        """The mean Spot price over ``zones``: live, else an observed zone price, else the estimate."""
        spot = self.data["spot"]
        region = spot.get(self.region)
        if region is None:
            raise self._problem(f"spot.{self.region}", "missing; fix: add the region's Spot figures or use --live")
        family = instance_type.split(".", 1)[0]
        observed = region.get("zones") or {}
        prices, live = [], True
        for zone in zones:
            if (instance_type, zone) in self.live_spot:
                prices.append(self.live_spot[(instance_type, zone)])
                continue
            live = False
            if zone in observed.get(instance_type, {}):
                prices.append(float(observed[instance_type][zone]))
                continue
            discount = region.get("discount_by_family", {}).get(family)
            if discount is None:
                raise self._problem(
                    f"spot.{self.region}.discount_by_family.{family}",
                    "missing; fix: add the family's Spot discount or an observed zone price, or use --live",
                )
            prices.append(self.on_demand(instance_type).usd * (1 - float(discount)))
        if live and zones:
            return Price(sum(prices) / len(prices), "DescribeSpotPriceHistory", self.live_as_of)
        return Price(sum(prices) / len(prices), spot["source"], str(spot["as_of"]), estimate=True)

    def capacity_block(self, instance_type: str) -> Price | None:
        """A Capacity Block's price per instance-hour, or None where neither the table nor --live has one."""
        if instance_type in self.live_blocks:
            return Price(self.live_blocks[instance_type], "DescribeCapacityBlockOfferings", self.live_as_of)
        blocks = self.data["capacity_blocks"]
        usd = (blocks.get(self.region) or {}).get(instance_type)
        return Price(float(usd), blocks["source"], str(blocks["as_of"]), estimate=True) if usd is not None else None

    def savings_plans(self, instance_type: str) -> list[tuple[str, Price]]:
        """Each commitment of the table (name, price per instance-hour): the type's rate where the table has
        one, else On-Demand less the plan's assumed discount (an estimate)."""
        plans = self.data.get("savings_plans") or {}
        on_demand = self.on_demand(instance_type).usd
        found = []
        for name, plan in (plans.get(self.region) or {}).items():
            rate = (plan.get("rates") or {}).get(instance_type)
            if rate is not None:
                found.append((name, Price(float(rate), plans["source"], str(plans["as_of"]))))
            else:
                usd = on_demand * (1 - float(plan["assumed_discount"]))
                found.append((name, Price(usd, plans["source"], str(plans["as_of"]), estimate=True)))
        return found

    def service(self, key: str, sub: str | None = None) -> Price:
        region = self.data["services"].get(self.region)
        if region is None:
            raise self._problem(f"services.{self.region}", "missing; fix: add the region's service prices")
        item = region.get(key)
        where = f"services.{self.region}.{key}"
        if sub is not None:
            item = (item or {}).get(sub)
            where += f".{sub}"
        if item is None:
            raise self._problem(where, "missing; fix: add it with usd, source and as_of from the AWS pricing page")
        return Price(float(item["usd"]), str(item["source"]), str(item["as_of"]))


def check_region(prices: PriceTable, instance_types: list[str], spot: bool, cpu_types: Sequence[str] = ()) -> None:
    """One line naming every section the table lacks for this region, with where to find the figures."""
    missing = prices.missing_for(instance_types, spot, cpu_types)
    home = prices.data["on_demand"]["region"]
    if missing and prices.region == home:  # the home region lacks only what its Slurm cluster adds
        raise prices._problem(
            "; ".join(missing),
            "missing; fix: add them as the table's others are written (https://aws.amazon.com/ec2/pricing/on-demand/, "
            "https://aws.amazon.com/pcs/pricing/)",
        )
    if missing:
        raise prices._problem(
            prices.region,
            f"no prices for this region (the table is complete for {home}); fix: add {'; '.join(missing)} as "
            f"{home}'s are written (figures: https://aws.amazon.com/ec2/pricing/on-demand/, "
            "https://aws.amazon.com/ec2/spot/pricing/, each service's pricing page), or deploy to "
            f"{home}",
        )


def load_prices(region: str, path: Path = PRICES_PATH) -> PriceTable:
    shown = display_path(path)
    data = read_mapping(
        path, shown, what="the price table", missing_fix="restore ops/cost/prices.yaml", first_field="on_demand:"
    )
    for key in ("on_demand", "spot", "capacity_blocks", "services"):
        if not isinstance(data.get(key), dict):
            raise ConfigError([f"{shown}: {key}: missing; fix: restore the section from ops/cost/prices.yaml"])
    return PriceTable(region=region, data=data, path=path)
