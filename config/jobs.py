"""The ``jobs:`` section: how training jobs run on the training fleets (the job document, torchrun's
rendezvous, the job log group). Every field has a default; the section may be left out."""

from __future__ import annotations

from pydantic import Field, field_validator

from config.audit import LOG_RETENTION_DAYS
from config.base import Strict

#: torchrun's default c10d rendezvous port.
DEFAULT_RENDEZVOUS_PORT = 29400


class Jobs(Strict):
    """``rendezvous_port``: the TCP port of torchrun's c10d store on the rendezvous node.
    ``max_restarts``: torchrun's ``--max-restarts`` (worker group restarts before the job fails).
    ``log_retention_days``: of ``/gpu-platform/<env>/jobs``; the environment's ``logging`` when left out."""

    rendezvous_port: int = Field(default=DEFAULT_RENDEZVOUS_PORT, ge=1024, le=65535)
    max_restarts: int = Field(default=3, ge=0, le=100)
    log_retention_days: int | None = None

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int | None) -> int | None:
        if value is not None and value not in LOG_RETENTION_DAYS:
            allowed = ", ".join(str(v) for v in LOG_RETENTION_DAYS)
            raise ValueError(f"{value} is not a CloudWatch Logs retention period; fix: use one of {allowed}")
        return value
