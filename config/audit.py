"""The ``logging:`` and ``audit:`` sections: log retention, the trail's log bucket lifecycle and Object Lock."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict

#: Retention periods CloudWatch Logs accepts (PutRetentionPolicy), in days.
LOG_RETENTION_DAYS: tuple[int, ...] = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731,
    1096, 1827, 2192, 2557, 2922, 3288, 3653,
)  # fmt: skip


class Logging(Strict):
    retention_days: int

    @field_validator("retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            allowed = ", ".join(str(v) for v in LOG_RETENTION_DAYS)
            raise ValueError(f"{value} is not a CloudWatch Logs retention period; fix: use one of {allowed}")
        return value


class ObjectLockMode(StrEnum):
    GOVERNANCE = "governance"
    COMPLIANCE = "compliance"


class TrailObjectLock(Strict):
    """S3 Object Lock default retention on the CloudTrail bucket (WORM audit logs)."""

    mode: ObjectLockMode
    retention_days: Annotated[int, Field(ge=1, le=3650)]


class Audit(Strict):
    """CloudTrail and log bucket settings."""

    log_transition_days: Annotated[int, Field(ge=1)] = 90
    log_expiration_days: Annotated[int, Field(ge=1)] = 365
    trail_object_lock: TrailObjectLock | None = None

    @model_validator(mode="after")
    def _lifecycle(self) -> Audit:
        if self.log_expiration_days <= self.log_transition_days:
            raise ValueError(
                f"@log_expiration_days: {self.log_expiration_days} is not after log_transition_days "
                f"({self.log_transition_days}); fix: expire logs later than they move to Glacier"
            )
        lock = self.trail_object_lock
        if lock and lock.retention_days > self.log_expiration_days:
            raise ValueError(
                f"@trail_object_lock.retention_days: {lock.retention_days} outlasts log_expiration_days "
                f"({self.log_expiration_days}); fix: lock trail logs no longer than they are kept"
            )
        return self
