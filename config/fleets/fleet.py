"""One entry of the ``fleets:`` section: a GPU Auto Scaling group, its instance types, EFA and
placement, and the rules that span its sub-models (capacity, scaling, refresh)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict
from config.catalog import UnknownInstanceType, efa_layout, efa_sizes, get_instance_type
from config.fleets.capacity import Capacity, CapacityBlock, CapacityReservation
from config.fleets.health import Health, dcgm_level, health_problems, node_env, required_hook_seconds
from config.fleets.refresh import (
    SERVED_MAX_HEALTHY_PERCENTAGE,
    SERVED_MIN_HEALTHY_PERCENTAGE,
    SERVICE_ROLLBACK_ALARMS,
    Refresh,
)
from config.fleets.scaling import Scaling, WarmPool
from config.fleets.scheduler import Scheduler, slurm_fleet_problems
from config.fleets.service import Service
from config.fleets.zero_capacity import zero_capacity_problems

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


class Fleet(Strict):
    name: str
    role: FleetRole
    instance_types: Annotated[list[str], Field(min_length=1, max_length=20)]
    efa: bool = False
    placement: Placement = Placement.NONE
    availability_zones: Annotated[list[str], Field(min_length=1)]
    capacity: Capacity
    on_demand_base_capacity: Annotated[int, Field(ge=0)] = 0
    on_demand_percentage_above_base: Annotated[int, Field(ge=0, le=100, description="a percentage")] = 0
    spot_allocation_strategy: SpotAllocationStrategy = SpotAllocationStrategy.PRICE_CAPACITY_OPTIMIZED
    capacity_reservation: CapacityReservation | None = None
    capacity_block: CapacityBlock | None = None
    root_volume_gib: Annotated[int, Field(ge=100, le=16384)] = 200
    scratch_volume_gib: Annotated[int, Field(ge=0, le=16384)] = 0
    containers: bool = False
    scaling: Scaling | None = None
    warm_pool: WarmPool | None = None
    refresh: Refresh | None = None
    health: Health = Field(default_factory=Health)
    service: Service | None = None
    scheduler: Scheduler = Scheduler.NONE

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a fleet name; fix: 1-24 characters, lowercase letters, digits and '-'")
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
            *zero_capacity_problems(self.capacity, self.scaling, self.capacity_block, self._requests_tracked),
            *health_problems(self.health, self.role.value, self.service_start_seconds),
            *self._service_problems(),
            *self._rollback_problems(),
            *slurm_fleet_problems(self),
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def _efa_problems(self) -> list[str]:
        problems = []
        if self.efa and self.role is FleetRole.INFERENCE:
            problems.append(
                "@efa: an inference fleet's nodes serve each on its own behind the load balancer, and the EFA "
                "group (all traffic between its members) is the training fleets' too; fix: set efa to false, "
                "or role to training"
            )
        if self.efa:
            for i, name in enumerate(self.instance_types):
                if not efa_layout(name):
                    family = get_instance_type(name).family
                    sizes = efa_sizes(family)
                    listing = f"EFA sizes of {family}: {', '.join(sizes)}" if sizes else f"{family} has no EFA size"
                    problems.append(
                        f"@instance_types[{i}]: {name} has no EFA; {listing}; fix: use one of them or set efa to false"
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
            if cap.min != cap.max and self.scheduler is Scheduler.NONE:  # a Slurm fleet's block starts at 0
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

    def _service_problems(self) -> list[str]:
        if self.service is None:
            return []
        if self.role is not FleetRole.INFERENCE:
            return ["@service: only an inference fleet serves; fix: remove service or set role to inference"]
        if self.service.image is not None and not self.containers:
            return ["@service.image: a container needs the fleet's container runtime; fix: set containers to true"]
        return []

    def _rollback_problems(self) -> list[str]:
        if self.refresh is None:
            return []
        if self.service is not None:
            low = self.refresh.min_healthy_percentage
            if "min_healthy_percentage" in self.refresh.model_fields_set and low != SERVED_MIN_HEALTHY_PERCENTAGE:
                return [
                    f"@refresh.min_healthy_percentage: {low} lets a refresh stop a served node before its "
                    "replacement passes the launch hook (with one node the load balancer answers 503 meanwhile); "
                    f"fix: set it to {SERVED_MIN_HEALTHY_PERCENTAGE} or leave it out, and pace the refresh with "
                    "max_healthy_percentage"
                ]
            return []
        return [
            f"@refresh.rollback_alarms[{i}]: {alarm.value!r} is a service alarm and this fleet serves nothing; "
            "fix: remove it, or add service: to the fleet"
            for i, alarm in enumerate(self.refresh.rollback_alarms)
            if alarm in SERVICE_ROLLBACK_ALARMS
        ]

    @property
    def _requests_tracked(self) -> bool:
        """Request-count target tracking on the served fleet's load balancer."""
        return self.service is not None and self.service.load_balancer.requests_per_target is not None

    @property
    def rollout(self) -> Refresh | None:
        """The refresh settings the AMI rollout applies, or None where the fleet is not rolled automatically:
        Capacity Block fleets (their nodes belong to the block's window), ``refresh.enabled: false`` and Slurm
        fleets (PCS launches their nodes from the launch template's latest version, config/fleets/scheduler.py).
        A served fleet whose ``rollback_alarms`` are not set also rolls back on its service alarms: a new AMI
        that breaks the service shows there first. A served fleet launches before it terminates: 100 % stays
        healthy and, unless set, up to 200 % runs during the refresh."""
        if self.capacity_block is not None or self.scheduler is Scheduler.SLURM:
            return None
        refresh = self.refresh or Refresh()
        if not refresh.enabled:
            return None
        if self.service is None:
            return refresh
        update: dict[str, object] = {"min_healthy_percentage": SERVED_MIN_HEALTHY_PERCENTAGE}
        if refresh.max_healthy_percentage is None:
            update["max_healthy_percentage"] = SERVED_MAX_HEALTHY_PERCENTAGE
        if "rollback_alarms" not in refresh.model_fields_set:
            update["rollback_alarms"] = [*refresh.rollback_alarms, *SERVICE_ROLLBACK_ALARMS]
        return refresh.model_copy(update=update)

    @property
    def dcgm_level(self) -> int:
        """The DCGM diagnostic level a node runs before it takes work."""
        return dcgm_level(self.health, self.role.value)

    @property
    def launch_hook_timeout_seconds(self) -> int:
        """HeartbeatTimeout of the launch lifecycle hook: ``health.launch_hook_timeout_seconds``, else the
        bootstrap's budget plus the DCGM level's and the service's start (config/fleets/health.py)."""
        return self.health.launch_hook_timeout_seconds or required_hook_seconds(
            self.health, self.role.value, self.service_start_seconds
        )

    @property
    def service_start_seconds(self) -> int:
        """How long the node waits for its service's health check before the launch completes (0: no service)."""
        return self.service.start_timeout_seconds if self.service is not None else 0

    @property
    def health_node_env(self) -> dict[str, str]:
        """node.env keys of the health check: HEALTH_DCGM_LEVEL, HEALTH_DCGM, HEALTH_EXTRA_FATAL_XIDS."""
        return node_env(self.health, self.role.value)

    @property
    def uses_spot(self) -> bool:
        return self.capacity_block is None and self.on_demand_percentage_above_base < 100
