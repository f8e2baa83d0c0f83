"""The ``network:`` section: the VPC's address range, its subnets and how GPU subnets reach AWS."""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict

#: The address ranges of RFC 1918; a VPC CIDR must lie inside one of them.
RFC1918 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


#: The largest subnet a mask may give (/16).
MIN_SUBNET_MASK = 16


class EgressMode(StrEnum):
    """How GPU subnets reach AWS APIs and the internet."""

    NAT = "nat"
    """Public subnets with NAT gateways; GPU subnets route 0.0.0.0/0 to NAT."""

    ISOLATED = "isolated"
    """No internet gateway and no NAT: AWS APIs through VPC endpoints only."""


class Network(Strict):
    vpc_cidr: str
    egress: EgressMode
    nat_gateways: Annotated[int, Field(ge=0)] = 0
    gpu_subnet_mask: Annotated[int, Field(ge=MIN_SUBNET_MASK, le=28)] = 20
    public_subnet_mask: Annotated[int, Field(ge=MIN_SUBNET_MASK, le=28)] = 24

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value, strict=True)
        except ValueError as err:
            raise ValueError(
                f"{value!r} is not a valid IPv4 network ({err}); fix: write it as address/prefix, e.g. 10.20.0.0/16"
            ) from None
        if not any(net.subnet_of(r) for r in RFC1918):
            raise ValueError(
                f"{value!r} is not a private (RFC 1918) range; fix: use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
            )
        if not 16 <= net.prefixlen <= 24:
            raise ValueError(f"{value!r} has prefix /{net.prefixlen}; fix: a VPC CIDR must be between /16 and /24")
        return value

    @model_validator(mode="after")
    def _egress(self) -> Network:
        if self.egress is EgressMode.ISOLATED and self.nat_gateways:
            raise ValueError(
                f"nat_gateways is {self.nat_gateways} but egress is 'isolated'; fix: set nat_gateways to 0 or egress to 'nat'"
            )
        if self.egress is EgressMode.NAT and self.nat_gateways < 1:
            raise ValueError(
                "egress is 'nat' but nat_gateways is 0; fix: set nat_gateways to at least 1, or egress to 'isolated'"
            )
        return self
