"""What an inference fleet serves: ``service`` (the node's model server and the load balancer in front of it).

The node runs the service as a systemd unit after its bootstrap and completes the launch lifecycle hook only
once the service answers ``health_check_path`` on ``port``; the load balancer's target group checks the same
path. ``command`` runs on the host; ``image`` runs with the NVIDIA container runtime (the fleet needs
``containers: true``).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict

_SG_ID = re.compile(r"^sg-[0-9a-f]{8}([0-9a-f]{9})?$")
_CERT_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]{36}$")
_PATH = re.compile(r"^/[A-Za-z0-9._~/-]{0,1023}$")
#: Ports the node keeps for itself: SSH, the CloudWatch agent's StatsD/collectd listeners, DCGM's host engine.
RESERVED_PORTS = frozenset({22, 8125, 25826, 5555})


class LoadBalancerSettings(Strict):
    """The Application Load Balancer of a served fleet. ``internal`` (default) places it in the private
    subnets; ``allowed_cidrs`` / ``allowed_security_groups`` are its only clients. ``certificate_arn``
    turns the listener to HTTPS (443), else HTTP (80). ``requests_per_target``: the target of a
    request-count scaling policy beside GPU utilization (none when left out)."""

    internal: bool = True
    allowed_cidrs: Annotated[list[str], Field(max_length=50)] = Field(default_factory=list)
    allowed_security_groups: Annotated[list[str], Field(max_length=5)] = Field(default_factory=list)
    certificate_arn: str | None = None
    deregistration_delay_seconds: int = Field(default=30, ge=0, le=3600, description="ELB's range is 0-3600")
    requests_per_target: int | None = Field(default=None, ge=1, le=1_000_000)

    @field_validator("allowed_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for i, cidr in enumerate(value):
            try:
                network = ipaddress.IPv4Network(cidr, strict=True)
            except ValueError:
                raise ValueError(f"@[{i}]: {cidr!r} is not an IPv4 CIDR block; fix: write it as 10.0.0.0/16") from None
            if network.prefixlen == 0:
                raise ValueError(
                    f"@[{i}]: {cidr} admits every address to a service without authentication; "
                    "fix: list the clients' own ranges"
                )
        return value

    @field_validator("allowed_security_groups")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        for i, group in enumerate(value):
            if not _SG_ID.match(group):
                raise ValueError(f"@[{i}]: {group!r} is not a security group id; fix: use sg- and 8 or 17 hex digits")
        return value

    @field_validator("certificate_arn")
    @classmethod
    def _certificate(cls, value: str | None) -> str | None:
        if value is not None and not _CERT_ARN.match(value):
            raise ValueError(
                f"{value!r} is not an ACM certificate ARN; fix: arn:aws:acm:<region>:<account>:certificate/<id>"
            )
        return value

    @model_validator(mode="after")
    def _clients(self) -> LoadBalancerSettings:
        if not self.allowed_cidrs and not self.allowed_security_groups:
            raise ValueError(
                "@allowed_cidrs: a load balancer with no clients serves no one; fix: list the clients' CIDR "
                "blocks in allowed_cidrs or their security groups in allowed_security_groups"
            )
        return self


class ServiceAlarmThresholds(Strict):
    """Thresholds of the service's alarms (into the alerts topic): the share of requests answered 5xx by
    the targets, the targets' p99 response time, and unhealthy hosts, each over 5 minutes."""

    http_5xx_percent: float = Field(default=5.0, gt=0, le=100, description="a percentage")
    p99_latency_seconds: float = Field(default=2.0, gt=0, le=3600)
    unhealthy_hosts: int = Field(default=1, ge=1, le=1000)


class Service(Strict):
    """One HTTP service per node: ``command`` (run on the host) or ``image`` (a container), exactly one."""

    port: int = Field(default=8080, ge=1024, le=65535, description="an unprivileged TCP port")
    health_check_path: str = "/health"
    command: str | None = Field(default=None, min_length=1, max_length=4096)
    image: str | None = Field(default=None, min_length=1, max_length=512)
    start_timeout_seconds: int = Field(
        default=600,
        ge=30,
        le=3600,
        description="the node's wait for the first 200 of the health check (an image pull included); the "
        "launch lifecycle hook's timeout grows by it",
    )
    load_balancer: LoadBalancerSettings
    alarms: ServiceAlarmThresholds = Field(default_factory=ServiceAlarmThresholds)

    @field_validator("port")
    @classmethod
    def _port(cls, value: int) -> int:
        if value in RESERVED_PORTS:
            raise ValueError(f"port {value} is used by the node's own services; fix: choose another, e.g. 8080")
        return value

    @field_validator("health_check_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not _PATH.match(value):
            raise ValueError(f"{value!r} is not a URL path; fix: start it with / and use letters, digits, . _ ~ - /")
        return value

    @model_validator(mode="after")
    def _one_way(self) -> Service:
        if (self.command is None) == (self.image is None):
            raise ValueError("@command: give exactly one of command (run on the host) or image (a container)")
        return self
