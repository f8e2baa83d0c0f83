"""How a new AMI reaches a fleet: ``refresh`` (instance refresh settings of the AMI rollout)."""

from __future__ import annotations

from enum import StrEnum
from itertools import pairwise
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict


class RollbackAlarm(StrEnum):
    """Fleet alarms (``gpu_constructs/observability/fleet_alarms.py``) and, on a served fleet, its service
    alarms (``service_alarms.py``) that can stop a rollout and roll it back.

    Utilization, idle and latency alarms follow the load, not the AMI, so they are not offered."""

    HEALTH_CHECK_FAILED = "health-check-failed"
    GPU_TEMPERATURE_CRITICAL = "gpu-temperature-critical"
    CAPACITY_SHORTFALL = "capacity-shortfall"
    HTTP_5XX_RATE = "http-5xx-rate"
    UNHEALTHY_HOSTS = "unhealthy-hosts"
    LB_5XX_RATE = "lb-5xx-rate"
    NO_HEALTHY_HOSTS = "no-healthy-hosts"


#: The service alarms: a served fleet's refresh watches them unless its ``rollback_alarms`` are set. The last
#: two are the load balancer's own view: with no healthy target it answers 503 itself (not a target 5xx) and
#: reports no unhealthy host.
SERVICE_ROLLBACK_ALARMS = (
    RollbackAlarm.HTTP_5XX_RATE,
    RollbackAlarm.UNHEALTHY_HOSTS,
    RollbackAlarm.LB_5XX_RATE,
    RollbackAlarm.NO_HEALTHY_HOSTS,
)
#: A served fleet's refresh: every node it replaces has passed its launch hook before an old one stops
#: (``min_healthy_percentage`` 100), and up to this much of the desired capacity is added at a time.
SERVED_MIN_HEALTHY_PERCENTAGE = 100
SERVED_MAX_HEALTHY_PERCENTAGE = 200


#: Longest checkpoint delay the instance refresh API takes (172800 s).
MAX_CHECKPOINT_DELAY_MINUTES = 2880


class Refresh(Strict):
    """How a new AMI reaches the fleet: an instance refresh that the AMI rollout runbook starts
    when ``/imagebuilder/gpu-platform/<env>/ami/latest`` changes. Replacements go a batch at a time, keeping
    ``min_healthy_percentage`` of the desired capacity in service and, where ``max_healthy_percentage`` is
    set, launching new nodes up to that share of it before old ones stop (left out: Auto Scaling terminates
    and launches at once). A served fleet keeps 100 and 200 unless told otherwise: its replacements pass
    their launch hook before an old node stops. At each checkpoint the refresh
    waits ``checkpoint_delay_minutes``; with ``auto_rollback`` it puts back the previous launch
    template version when it fails or when one of ``rollback_alarms`` goes to ALARM (by default the
    node health and temperature alarms, and on a served fleet its service alarms too)."""

    enabled: bool = True
    min_healthy_percentage: Annotated[
        int, Field(ge=0, le=100, description="a percentage of the desired capacity; default 90")
    ] = 90
    max_healthy_percentage: Annotated[
        int | None,
        Field(
            ge=100,
            le=200,
            description="a percentage of the desired capacity; the instance refresh API takes 100 to 200",
        ),
    ] = None
    instance_warmup_minutes: Annotated[int, Field(ge=0, le=MAX_CHECKPOINT_DELAY_MINUTES)] = 10
    checkpoint_percentages: list[int] = Field(default_factory=lambda: [50, 100])
    checkpoint_delay_minutes: Annotated[
        int,
        Field(ge=0, le=MAX_CHECKPOINT_DELAY_MINUTES, description="48 hours, the instance refresh API's limit"),
    ] = 15
    bake_minutes: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_CHECKPOINT_DELAY_MINUTES,
            description="after the last replacement, the rollback alarms still roll back for this long (BakeTime)",
        ),
    ] = 15
    auto_rollback: bool = True
    rollback_alarms: list[RollbackAlarm] = Field(
        default_factory=lambda: [RollbackAlarm.HEALTH_CHECK_FAILED, RollbackAlarm.GPU_TEMPERATURE_CRITICAL]
    )

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

    @model_validator(mode="after")
    def _healthy_range(self) -> Refresh:
        low, high = self.min_healthy_percentage, self.max_healthy_percentage
        if high is not None and high - low > 100:
            raise ValueError(
                f"@max_healthy_percentage: {high} is more than 100 above min_healthy_percentage ({low}), which the "
                f"instance refresh API refuses; fix: lower it to at most {low + 100} or raise min_healthy_percentage "
                f"to at least {high - 100}"
            )
        return self
