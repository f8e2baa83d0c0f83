"""Schema of the ``fleets:`` section: GPU Auto Scaling groups and their capacity mix."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from itertools import pairwise
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict
from config.catalog import UnknownInstanceType, efa_layout, efa_sizes, get_instance_type
from config.fleet_zero import zero_capacity_problems

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,23}$")


class FleetRole(StrEnum):
    TRAINING = "training"
    INFERENCE = "inference"


class Placement(StrEnum):
    CLUSTER = "cluster"
    SPREAD = "spread"
    NONE = "none"


class SpotAllocationStrategy(StrEnum):
    PRICE_CAPACITY_OPTIMIZED = "price-capacity-optimized"
    CAPACITY_OPTIMIZED = "capacity-optimized"
    CAPACITY_OPTIMIZED_PRIORITIZED = "capacity-optimized-prioritized"
    LOWEST_PRICE = "lowest-price"


class ReservationPreference(StrEnum):
    FIRST = "capacity-reservations-first"
    ONLY = "capacity-reservations-only"
    NONE = "none"
    DEFAULT = "default"


_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")


def _reservation_id(value: str) -> str:
    if not _RESERVATION_ID.match(value):
        raise ValueError(
            f"{value!r} is not a capacity reservation id; fix: copy the cr-... id from the EC2 console or API"
        )
    return value


class Capacity(Strict):
    min: Annotated[int, Field(ge=0)]
    max: Annotated[int, Field(ge=0)]
    desired: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _bounds(self) -> Capacity:
        if self.min > self.max:
            raise ValueError(f"@min: {self.min} is more than max ({self.max}); fix: make min <= max")
        if self.desired is not None and not self.min <= self.desired <= self.max:
            raise ValueError(
                f"@desired: {self.desired} is outside min..max ({self.min}..{self.max}); fix: pick a value in that range"
            )
        return self


class CapacityReservation(Strict):
    """On-Demand Capacity Reservations the group launches into first (or only).

    ``capacity-reservations-first`` without targets uses the account's open
    reservations that match the instance type and zone.
    """

    preference: ReservationPreference
    ids: list[str] = Field(default_factory=list)
    resource_group_arns: list[str] = Field(default_factory=list)

    @field_validator("ids")
    @classmethod
    def _ids(cls, value: list[str]) -> list[str]:
        problems = []
        for i, item in enumerate(value):
            try:
                _reservation_id(item)
            except ValueError as err:
                problems.append(f"@[{i}]: {err}")
        if problems:
            raise ValueError("\n".join(problems))
        return value

    @model_validator(mode="after")
    def _targets(self) -> CapacityReservation:
        targets = bool(self.ids) + bool(self.resource_group_arns)
        if targets == 2:
            raise ValueError(
                "@: both ids and resource_group_arns are set; fix: target reservations by ids or by one group"
            )
        if self.preference in (ReservationPreference.NONE, ReservationPreference.DEFAULT) and targets:
            raise ValueError(
                f"@preference: {self.preference} takes no targets; fix: remove ids/resource_group_arns, or use "
                "capacity-reservations-first"
            )
        if self.preference is ReservationPreference.ONLY and not targets:
            raise ValueError(
                "@preference: capacity-reservations-only needs the reservations to launch into; fix: add ids (cr-...) "
                "or resource_group_arns"
            )
        return self


class CapacityBlock(Strict):
    """A Capacity Block for ML: a reserved, co-located block of GPU instances for a fixed window (UTC)."""

    id: str
    start: datetime
    end: datetime

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _reservation_id(value)

    @model_validator(mode="after")
    def _window(self) -> CapacityBlock:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("@: start and end need a time zone; fix: write them in UTC, e.g. 2026-12-01T11:30:00Z")
        if self.end <= self.start:
            raise ValueError(
                f"@end: {self.end.isoformat()} is not after start ({self.start.isoformat()}); "
                "fix: copy the block's start and end from EC2"
            )
        return self


_CRON_FIELD = re.compile(r"^[0-9*/,\-A-Za-z?]+$")


class TargetTracking(Strict):
    """Keep the fleet's average GPU utilization near a target."""

    gpu_utilization_percent: Annotated[float, Field(gt=0, le=100)]


class StepScaling(Strict):
    """Scale out when GPUs stay busy, in when they stay idle (the user's rule: above 85 % for
    15 minutes adds capacity, below 30 % for 30 minutes removes it)."""

    scale_out_above_percent: Annotated[float, Field(gt=0, le=100)] = 85
    scale_out_after_minutes: Annotated[int, Field(ge=1, le=1440)] = 15
    scale_out_instances: Annotated[int, Field(ge=1)] = 1
    scale_in_below_percent: Annotated[float, Field(ge=0, lt=100)] = 30
    scale_in_after_minutes: Annotated[int, Field(ge=1, le=1440)] = 30
    scale_in_instances: Annotated[int, Field(ge=1)] = 1

    @model_validator(mode="after")
    def _band(self) -> StepScaling:
        if self.scale_in_below_percent >= self.scale_out_above_percent:
            raise ValueError(
                f"@scale_in_below_percent: {self.scale_in_below_percent:g} is not below scale_out_above_percent "
                f"({self.scale_out_above_percent:g}); fix: leave a band between the two so the fleet does not flap"
            )
        for key in ("scale_out_after_minutes", "scale_in_after_minutes"):
            if getattr(self, key) % 5:
                raise ValueError(
                    f"@{key}: {getattr(self, key)} is not a multiple of 5; fix: use 5, 10, 15, ... (5-minute periods)"
                )
        return self


class ScheduledAction(Strict):
    """A recurring capacity change: cron in the Auto Scaling form (minute hour day month weekday)."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,40}$")]
    cron: str
    time_zone: str = "UTC"
    min: Annotated[int, Field(ge=0)] | None = None
    max: Annotated[int, Field(ge=0)] | None = None
    desired: Annotated[int, Field(ge=0)] | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        fields = value.split()
        if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
            raise ValueError(
                f"{value!r} is not a five-field cron expression; fix: write minute hour day-of-month month day-of-week, "
                "e.g. '0 8 * * 1-5'"
            )
        return value

    @model_validator(mode="after")
    def _sizes(self) -> ScheduledAction:
        if self.min is None and self.max is None and self.desired is None:
            raise ValueError("@: the action changes nothing; fix: set at least one of min, max, desired")
        lo, hi = self.min, self.max
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"@min: {lo} is more than max ({hi}); fix: make min <= max")
        if self.desired is not None and (
            (lo is not None and self.desired < lo) or (hi is not None and self.desired > hi)
        ):
            raise ValueError(f"@desired: {self.desired} is outside min..max; fix: pick a value in that range")
        return self


class Scaling(Strict):
    target_tracking: TargetTracking | None = None
    step: StepScaling | None = None
    schedules: list[ScheduledAction] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_dynamic(self) -> Scaling:
        if self.target_tracking and self.step:
            raise ValueError(
                "@: target_tracking and step both scale on GPU utilization and would fight; fix: keep one of them"
            )
        names = [a.name for a in self.schedules]
        if len(set(names)) != len(names):
            raise ValueError("@schedules: two scheduled actions share a name; fix: give each its own name")
        return self


class WarmPool(Strict):
    """Stopped, pre-initialized instances: scale-out reaches a ready GPU in minutes, not a full boot."""

    min_size: Annotated[int, Field(ge=0)] = 0
    max_prepared_capacity: Annotated[int, Field(ge=0)] | None = None
    reuse_on_scale_in: bool = True


class RollbackAlarm(StrEnum):
    """Fleet alarms (``gpu_constructs/fleet_alarms.py``) that can stop a rollout and roll it back.

    Utilization and idle alarms follow the load, not the AMI, so they are not offered."""

    HEALTH_CHECK_FAILED = "health-check-failed"
    GPU_TEMPERATURE_CRITICAL = "gpu-temperature-critical"
    CAPACITY_SHORTFALL = "capacity-shortfall"


#: Longest checkpoint delay the instance refresh API takes (172800 s).
MAX_CHECKPOINT_DELAY_MINUTES = 2880


class Refresh(Strict):
    """How a new AMI reaches the fleet: an instance refresh that the AMI rollout runbook starts
    when ``/imagebuilder/gpu-platform/<env>/ami/latest`` changes. Replacements go a batch at a time, keeping
    ``min_healthy_percentage`` of the desired capacity in service; at each checkpoint the refresh
    waits ``checkpoint_delay_minutes``; with ``auto_rollback`` it puts back the previous launch
    template version when it fails or when one of ``rollback_alarms`` goes to ALARM."""

    enabled: bool = True
    min_healthy_percentage: int = 90
    instance_warmup_minutes: Annotated[int, Field(ge=0, le=MAX_CHECKPOINT_DELAY_MINUTES)] = 10
    checkpoint_percentages: list[int] = Field(default_factory=lambda: [50, 100])
    checkpoint_delay_minutes: int = 15
    auto_rollback: bool = True
    rollback_alarms: list[RollbackAlarm] = Field(
        default_factory=lambda: [RollbackAlarm.HEALTH_CHECK_FAILED, RollbackAlarm.GPU_TEMPERATURE_CRITICAL]
    )

    @field_validator("min_healthy_percentage")
    @classmethod
    def _healthy(cls, value: int) -> int:
        if not 0 <= value <= 100:
            raise ValueError(f"{value} is not a percentage; fix: use a whole number from 0 to 100 (default 90)")
        return value

    @field_validator("checkpoint_delay_minutes")
    @classmethod
    def _delay(cls, value: int) -> int:
        if not 0 <= value <= MAX_CHECKPOINT_DELAY_MINUTES:
            raise ValueError(
                f"{value} minutes is outside 0..{MAX_CHECKPOINT_DELAY_MINUTES}; fix: use at most "
                f"{MAX_CHECKPOINT_DELAY_MINUTES} (48 hours, the instance refresh API's limit)"
            )
        return value

    @field_validator("checkpoint_percentages")
    @classmethod
    def _checkpoints(cls, value: list[int]) -> list[int]:
        if not value:
            return value
        shown = "[" + ", ".join(str(v) for v in value) + "]"
        if any(not 1 <= v <= 100 for v in value) or any(b <= a for a, b in pairwise(value)):
            raise ValueError(
                f"{shown} is not a list of percentages from 1 to 100 in strictly ascending order; "
                "fix: list each checkpoint once, smallest first, e.g. [50, 100]"
            )
        if value[-1] != 100:
            raise ValueError(
                f"{shown} ends at {value[-1]}, so the refresh would stop with part of the fleet on the old AMI; "
                "fix: end the list with 100"
            )
        return value

    @field_validator("rollback_alarms")
    @classmethod
    def _alarms(cls, value: list[RollbackAlarm]) -> list[RollbackAlarm]:
        if len(set(value)) != len(value):
            raise ValueError("an alarm is listed twice; fix: list each alarm once")
        return value


class Fleet(Strict):
    name: str
    role: FleetRole
    instance_types: Annotated[list[str], Field(min_length=1, max_length=20)]
    efa: bool = False
    placement: Placement = Placement.NONE
    availability_zones: Annotated[list[str], Field(min_length=1)]
    capacity: Capacity
    on_demand_base_capacity: Annotated[int, Field(ge=0)] = 0
    on_demand_percentage_above_base: int = 0
    spot_allocation_strategy: SpotAllocationStrategy = SpotAllocationStrategy.PRICE_CAPACITY_OPTIMIZED
    capacity_reservation: CapacityReservation | None = None
    capacity_block: CapacityBlock | None = None
    launch_template_per_layout: bool = True
    root_volume_gib: Annotated[int, Field(ge=100, le=16384)] = 200
    scratch_volume_gib: Annotated[int, Field(ge=0, le=16384)] = 0
    containers: bool = False
    scaling: Scaling | None = None
    warm_pool: WarmPool | None = None
    refresh: Refresh | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a fleet name; fix: 1-24 characters, lowercase letters, digits and '-'")
        return value

    @field_validator("on_demand_percentage_above_base")
    @classmethod
    def _percent(cls, value: int) -> int:
        if not 0 <= value <= 100:
            raise ValueError(f"{value} is not a percentage; fix: use a whole number from 0 to 100")
        return value

    @field_validator("instance_types")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        problems = []
        for i, name in enumerate(value):
            try:
                get_instance_type(name)
            except UnknownInstanceType as err:
                problems.append(f"@[{i}]: {err}")
        if len(set(value)) != len(value):
            problems.append("@: an instance type is listed twice; fix: list each type once, in preference order")
        if problems:
            raise ValueError("\n".join(problems))
        return value

    @model_validator(mode="after")
    def _rules(self) -> Fleet:
        problems = [
            *self._efa_problems(),
            *self._capacity_problems(),
            *self._elasticity_problems(),
            *zero_capacity_problems(self),
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def _efa_problems(self) -> list[str]:
        problems = []
        if self.efa:
            for i, name in enumerate(self.instance_types):
                if not efa_layout(name):
                    family = get_instance_type(name).family
                    sizes = efa_sizes(family)
                    listing = f"EFA sizes of {family}: {', '.join(sizes)}" if sizes else f"{family} has no EFA size"
                    problems.append(
                        f"@instance_types[{i}]: {name} has no EFA; {listing}; fix: use one of them or set efa to false"
                    )
            layouts = {efa_layout(n) for n in self.instance_types}
            if len(layouts) > 1 and not self.launch_template_per_layout:
                problems.append(
                    "@launch_template_per_layout: these instance types need different EFA interface layouts "
                    f"({', '.join(f'{n}: {len(efa_layout(n))}' for n in self.instance_types)}); "
                    "fix: set launch_template_per_layout to true, or list types of one layout"
                )
            if len(self.availability_zones) > 1:
                problems.append(
                    f"@availability_zones: an EFA fleet must stay in one zone (EFA traffic does not cross zones), "
                    f"got {', '.join(self.availability_zones)}; fix: keep one zone"
                )
            if self.placement is not Placement.CLUSTER and self.capacity_block is None:
                problems.append(
                    f"@placement: {self.placement} for an EFA fleet; fix: use cluster (Capacity Blocks, already "
                    "co-located, are the only exception)"
                )
        if self.placement is Placement.CLUSTER and len(self.availability_zones) > 1:
            problems.append("@placement: a cluster placement group lives in one zone; fix: keep one zone or use spread")
        return problems

    def _capacity_problems(self) -> list[str]:
        problems = []
        cap = self.capacity
        if self.on_demand_base_capacity > cap.max:
            problems.append(
                f"@on_demand_base_capacity: {self.on_demand_base_capacity} is more than capacity.max ({cap.max}); "
                "fix: lower it to at most max"
            )
        block = self.capacity_block
        if block is not None:
            if self.placement is not Placement.NONE:
                problems.append(
                    "@placement: a Capacity Block is already co-located and forbids a placement group of ours; "
                    "fix: set placement to none"
                )
            if cap.min != cap.max:
                problems.append(
                    f"@capacity: a Capacity Block fleet needs min = max (got {cap.min} and {cap.max}); "
                    "fix: set both to the block's instance count"
                )
            if len(self.instance_types) != 1:
                problems.append(
                    "@instance_types: a Capacity Block is for one instance type; fix: list only the block's type"
                )
            if self.capacity_reservation is not None:
                problems.append(
                    "@capacity_reservation: a fleet uses a Capacity Block or On-Demand Capacity Reservations, not both; "
                    "fix: remove one"
                )
        return problems

    def _elasticity_problems(self) -> list[str]:
        problems = []
        if self.capacity_block is not None and (self.scaling or self.warm_pool):
            problems.append(
                "@scaling: a Capacity Block fleet has a fixed size (min = max) for the block's window; "
                "fix: remove scaling and warm_pool"
            )
        if self.capacity_block is not None and self.refresh is not None:
            problems.append(
                "@refresh: a Capacity Block fleet is not refreshed automatically (replacing nodes inside the block "
                "would cut its jobs short); fix: remove refresh, and deploy the Fleets stack between blocks to move "
                "it to a new AMI"
            )
        if self.warm_pool is not None:
            if len(self.instance_types) != 1 or self.on_demand_percentage_above_base != 100:
                problems.append(
                    "@warm_pool: EC2 Auto Scaling warm pools do not work with Spot or mixed instance types; "
                    "fix: use one instance type and on_demand_percentage_above_base: 100, or remove warm_pool"
                )
            prepared = self.warm_pool.max_prepared_capacity
            if prepared is not None and prepared < self.capacity.max:
                problems.append(
                    f"@warm_pool.max_prepared_capacity: {prepared} is below capacity.max ({self.capacity.max}); "
                    "fix: it counts the group's instances too: make it at least max, or leave it out"
                )
        return problems

    @property
    def rollout(self) -> Refresh | None:
        """The refresh settings the AMI rollout applies, or None where the fleet is not rolled automatically:
        Capacity Block fleets (their nodes belong to the block's window) and ``refresh.enabled: false``."""
        if self.capacity_block is not None:
            return None
        refresh = self.refresh or Refresh()
        return refresh if refresh.enabled else None

    @property
    def uses_spot(self) -> bool:
        return self.capacity_block is None and self.on_demand_percentage_above_base < 100

    @property
    def efa_layouts(self) -> dict[tuple[int, ...], list[str]]:
        """Instance types grouped by EFA interface layout, in preference order."""
        groups: dict[tuple[int, ...], list[str]] = {}
        for name in self.instance_types:
            groups.setdefault(efa_layout(name) if self.efa else (), []).append(name)
        return groups
