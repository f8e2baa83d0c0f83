"""A fleet's size and the reserved capacity it launches into: ``capacity``, ``capacity_reservation``
(On-Demand Capacity Reservations) and ``capacity_block`` (Capacity Blocks for ML)."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from config.base import Strict

_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")


def reservation_id(value: str) -> str:
    """A capacity reservation id (``cr-`` and 8 to 17 hex digits); Capacity Blocks have one too."""
    if not _RESERVATION_ID.match(value):
        raise ValueError(
            f"{value!r} is not a capacity reservation id; fix: copy the cr-... id from the EC2 console or API"
        )
    return value


ReservationId = Annotated[str, AfterValidator(reservation_id)]


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


class ReservationPreference(StrEnum):
    FIRST = "capacity-reservations-first"
    ONLY = "capacity-reservations-only"
    NONE = "none"
    DEFAULT = "default"


class CapacityReservation(Strict):
    """On-Demand Capacity Reservations the group launches into first (or only).

    ``capacity-reservations-first`` without targets uses the account's open
    reservations that match the instance type and zone.
    """

    preference: ReservationPreference
    ids: list[ReservationId] = Field(default_factory=list)
    resource_group_arns: list[str] = Field(default_factory=list)

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

    id: ReservationId
    start: datetime
    end: datetime
    #: The block's number of instances; a Slurm fleet's node group may not exceed it (an Auto Scaling fleet's
    #: min = max is its size already).
    instance_count: Annotated[int, Field(ge=1)] | None = None

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
