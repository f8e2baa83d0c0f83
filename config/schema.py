"""The pydantic schema of one environment's config file.

Every rule here raises a ``ValueError`` whose text says what is wrong and how to
fix it; ``config.loader`` prefixes it with the file and the field path.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from config.alarms import Alarms
from config.audit import LOG_RETENTION_DAYS, Audit, Logging, ObjectLockMode, TrailObjectLock
from config.base import ENV_NAME, Strict, WrittenInt
from config.budget import Budget
from config.catalog import get_instance_type
from config.fleets import Fleet, Scheduler
from config.image import Image, slurm_version_problems
from config.jobs import Jobs
from config.network import MIN_SUBNET_MASK, RFC1918, EgressMode, Network
from config.notifications import Notifications
from config.preflight import Preflight
from config.slurm import Slurm, slurm_problems
from config.storage import Storage

#: Names the stacks and other modules import from here; the network, logging and audit sections are defined
#: in ``config.network`` and ``config.audit``.
__all__ = [
    "LOG_RETENTION_DAYS",
    "REQUIRED_TAGS",
    "RFC1918",
    "AccountId",
    "Audit",
    "EgressMode",
    "Environment",
    "Logging",
    "Network",
    "ObjectLockMode",
    "Region",
    "TrailObjectLock",
    "aws_account_id",
    "aws_region",
]

REQUIRED_TAGS = ("Project", "Environment", "Owner", "CostCenter")

_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")


def aws_account_id(value: object) -> str:
    """A 12-digit account id written as a string (a YAML number loses leading zeros, or is octal)."""
    if isinstance(value, WrittenInt):
        raise ValueError(
            f"{value.written} is read by YAML as the number {int(value)}, not as the digits written; "
            f'fix: quote the account id as written ("{value.written}")'
        )
    if isinstance(value, int) and not isinstance(value, bool):
        fix = (
            f'quote the account id as written ("{value}")'
            if len(str(value)) == 12
            else "write the 12-digit account id as a quoted string"
        )
        raise ValueError(f"{value} is a number, not a quoted account id; fix: {fix}")
    if not isinstance(value, str) or not re.fullmatch(r"\d{12}", value):
        raise ValueError(f"{value!r} is not an AWS account id; fix: write the 12-digit account id as a quoted string")
    return value


def aws_region(value: str) -> str:
    """A region code such as us-east-1."""
    if not _REGION.match(value):
        raise ValueError(f"{value!r} is not an AWS region code; fix: use a code such as us-east-1 or eu-west-1")
    return value


#: An account id field: a quoted 12-digit string (``aws_account_id``).
AccountId = Annotated[str, BeforeValidator(aws_account_id)]
#: A region field (``aws_region``).
Region = Annotated[str, AfterValidator(aws_region)]


#: Addresses AWS keeps in every subnet (network, VPC router, DNS, future use, broadcast).
SUBNET_RESERVED_ADDRESSES = 5


class Environment(Strict):
    """One deployment environment (dev, staging, prod), as its YAML file describes it."""

    name: str
    account: AccountId
    region: Region
    availability_zones: Annotated[list[str], Field(min_length=1, max_length=6)]
    protect_stateful_resources: bool = False
    network: Network
    logging: Logging
    audit: Audit = Audit()
    storage: Storage
    fleets: list[Fleet] = Field(default_factory=list)
    image: Image = Image()
    notifications: Notifications = Notifications()
    #: An AWS Budgets cost budget of the account, notifying the alerts topic (config/budget.py); none when left out.
    budget: Budget | None = None
    alarms: Alarms = Alarms()
    preflight: Preflight = Preflight()
    jobs: Jobs = Jobs()
    #: The PCS cluster of the ``scheduler: slurm`` fleets (config/slurm.py); required with them, refused without.
    slurm: Slurm | None = None
    tags: dict[str, str]
    #: The tags of the environment's placement groups, pinned: Tags is create-only for AWS::EC2::PlacementGroup,
    #: so these never follow ``tags`` (a change re-creates the groups). Left out: ``tags`` as they are now.
    placement_group_tags: dict[str, str] | None = None

    @property
    def pinned_placement_group_tags(self) -> dict[str, str]:
        return dict(self.tags if self.placement_group_tags is None else self.placement_group_tags)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ENV_NAME.match(value):
            raise ValueError(
                f"{value!r} is not a valid environment name; fix: 2-16 characters, lowercase letters, digits and '-', starting with a letter"
            )
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        missing = [t for t in REQUIRED_TAGS if t not in value]
        if missing:
            raise ValueError(
                f"missing cost-allocation tag(s) {', '.join(missing)}; fix: add them (required: {', '.join(REQUIRED_TAGS)})"
            )
        empty = [t for t in REQUIRED_TAGS if not str(value[t]).strip()]
        if empty:
            raise ValueError(f"cost-allocation tag(s) {', '.join(empty)} are empty; fix: give each a value")
        return value

    @model_validator(mode="after")
    def _cross_field(self) -> Environment:
        # Each problem names its own field path ("@path: message"); config.loader
        # reports one line per problem.
        zone_problems = self._zone_problems()
        problems = [
            *zone_problems,
            *self._tag_problems(),
            *self._network_problems(),
            *self._image_problems(),
            *self._slurm_problems(),
        ]
        # Zones named by storage and fleets are checked against the environment's
        # only once those are right: one wrong zone must not echo in every section.
        if not zone_problems:
            problems += [*self._storage_problems(), *self._fleet_problems(), *self._address_problems()]
        else:
            problems += [p for p in self._fleet_problems() if "zone" not in p]
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def _zone_problems(self) -> list[str]:
        problems = []
        seen: dict[str, int] = {}
        for i, zone in enumerate(self.availability_zones):
            if not re.fullmatch(re.escape(self.region) + r"[a-z]", zone):
                problems.append(
                    f"@availability_zones[{i}]: {zone!r} is not an availability zone of {self.region}; "
                    f"fix: use a zone name such as {self.region}a"
                )
            elif zone in seen:
                problems.append(
                    f"@availability_zones[{i}]: {zone!r} is already listed at availability_zones[{seen[zone]}]; fix: list each zone once"
                )
            seen.setdefault(zone, i)
        return problems

    def _storage_problems(self) -> list[str]:
        zone = self.storage.file_system.availability_zone
        if zone not in self.availability_zones:
            return [
                f"@storage.file_system.availability_zone: {zone!r} is not one of this environment's zones; "
                f"fix: use one of {', '.join(self.availability_zones)}"
            ]
        return []

    def _fleet_problems(self) -> list[str]:
        problems = []
        names: dict[str, int] = {}
        lustre_zone = self.storage.file_system.availability_zone
        for i, fleet in enumerate(self.fleets):
            if fleet.name in names:
                problems.append(
                    f"@fleets[{i}].name: {fleet.name!r} is already used by fleets[{names[fleet.name]}]; fix: give each fleet its own name"
                )
            names.setdefault(fleet.name, i)
            for j, zone in enumerate(fleet.availability_zones):
                if zone not in self.availability_zones:
                    problems.append(
                        f"@fleets[{i}].availability_zones[{j}]: {zone!r} is not one of this environment's zones; "
                        f"fix: use one of {', '.join(self.availability_zones)}"
                    )
            problems += self._service_problems(i, fleet)
            if fleet.efa and fleet.availability_zones != [lustre_zone]:
                problems.append(
                    f"@fleets[{i}].availability_zones: the EFA fleet {fleet.name!r} runs in "
                    f"{', '.join(fleet.availability_zones)} but the Lustre file system is in {lustre_zone}; "
                    "fix: put both in the same zone (storage.file_system.availability_zone)"
                )
        return problems

    def _address_problems(self) -> list[str]:
        """Each GPU subnet holds the network interfaces of every node that may run in its zone: a fleet's
        ``capacity.max`` nodes (all of them in one zone, where Auto Scaling finds capacity only there) times
        the interfaces of its largest layout (EFA: one per interface of the catalog, p5 32, p4d 4; else 1),
        against the subnet's addresses less the 5 AWS reserves."""
        mask = self.network.gpu_subnet_mask
        usable = 2 ** (32 - mask) - SUBNET_RESERVED_ADDRESSES
        problems = []
        for zone in self.availability_zones:
            parts = []
            needed = 0
            for i, fleet in enumerate(self.fleets):
                if zone not in fleet.availability_zones or fleet.capacity.max == 0:
                    continue
                per_node = max(
                    (get_instance_type(t).max_efa_interfaces or 1) if fleet.efa else 1 for t in fleet.instance_types
                )
                needed += fleet.capacity.max * per_node
                parts.append(f"fleets[{i}] {fleet.name} {fleet.capacity.max} x {per_node}")
            if needed > usable:
                fits = 32 - (needed + SUBNET_RESERVED_ADDRESSES - 1).bit_length()
                fix = (
                    f"set gpu_subnet_mask to {fits} or lower, or lower capacity.max"
                    if fits >= MIN_SUBNET_MASK
                    else f"lower capacity.max (a GPU subnet is at most /{MIN_SUBNET_MASK})"
                )
                problems.append(
                    f"@network.gpu_subnet_mask: the GPU subnet of {zone} (/{mask}) has {usable} usable addresses "
                    f"(AWS reserves {SUBNET_RESERVED_ADDRESSES}), but its nodes' network interfaces need {needed} "
                    f"({', '.join(parts)}: capacity.max x interfaces per node); fix: {fix}"
                )
        return problems

    def _service_problems(self, i: int, fleet: Fleet) -> list[str]:
        """An Application Load Balancer spans two zones or more, and an internet-facing one public subnets."""
        if fleet.service is None:
            return []
        problems = []
        if len(self.availability_zones) < 2:
            problems.append(
                f"@fleets[{i}].service: a load balancer needs subnets in two availability zones, the environment "
                f"has {len(self.availability_zones)}; fix: list a second zone in availability_zones"
            )
        certificate = fleet.service.load_balancer.certificate_arn
        if certificate is not None:
            _, _, _, region, account, _ = certificate.split(":", 5)
            if (region, account) != (self.region, self.account):
                problems.append(
                    f"@fleets[{i}].service.load_balancer.certificate_arn: the certificate is in {region}, account "
                    f"{account}, but the load balancer is in {self.region}, account {self.account} (a load balancer "
                    f"uses ACM certificates of its own region and account only); fix: request or import the "
                    f"certificate in ACM of {self.region} in account {self.account} and use its ARN"
                )
        if not fleet.service.load_balancer.internal and self.network.egress is not EgressMode.NAT:
            problems.append(
                f"@fleets[{i}].service.load_balancer.internal: false needs public subnets, which only "
                "network.egress 'nat' creates; fix: keep internal: true (clients in the VPC) or set egress to 'nat'"
            )
        return problems

    @property
    def slurm_fleets(self) -> list[Fleet]:
        """The fleets whose jobs go through the environment's PCS cluster."""
        return [fleet for fleet in self.fleets if fleet.scheduler is Scheduler.SLURM]

    def _slurm_problems(self) -> list[str]:
        return slurm_problems(self.name, self.region, self.slurm, self.fleets)

    def _image_problems(self) -> list[str]:
        problems = []
        if self.image.build and self.network.egress is EgressMode.ISOLATED:
            problems.append(
                "@image.build: an environment with network.egress 'isolated' cannot build images (no route to apt, "
                "NVIDIA, PyPI or the EFA installer); fix: set image.build: false and add "
                f"{self.name!r} to image.share_with of a building environment (network.egress: nat)"
            )
        problems += [
            f"@image.share_with[{i}]: {name!r} is this environment; "
            "fix: remove it, a building environment always receives its own AMIs"
            for i, name in enumerate(self.image.share_with)
            if name == self.name
        ]
        pcs = slurm_version_problems(self.image, self.slurm.slurm_version if self.slurm else None)
        return problems + (pcs if self.slurm or not self.slurm_fleets else [])  # else: slurm_problems' one line

    def _tag_problems(self) -> list[str]:
        if self.tags["Environment"] != self.name:
            return [
                f"@tags.Environment: {self.tags['Environment']!r} differs from the environment name {self.name!r}; fix: set it to {self.name!r}"
            ]
        return []

    def _network_problems(self) -> list[str]:
        net = self.network
        if net.egress is EgressMode.NAT and net.nat_gateways > len(self.availability_zones):
            return [
                f"@network.nat_gateways: {net.nat_gateways} is more than the {len(self.availability_zones)} availability zone(s); "
                f"fix: use at most one NAT gateway per zone"
            ]
        return self._check_subnets_fit()

    def _check_subnets_fit(self) -> list[str]:
        net = self.network
        vpc = ipaddress.IPv4Network(net.vpc_cidr)
        masks = [net.gpu_subnet_mask] * len(self.availability_zones)
        if net.egress is EgressMode.NAT:
            masks += [net.public_subnet_mask] * len(self.availability_zones)
        needed = sum(2 ** (32 - m) for m in masks)
        if any(m < vpc.prefixlen for m in masks) or needed > vpc.num_addresses:
            return [
                f"@network: {len(masks)} subnets (GPU /{net.gpu_subnet_mask}"
                + (f", public /{net.public_subnet_mask}" if net.egress is EgressMode.NAT else "")
                + f") need {needed} addresses but {net.vpc_cidr} has {vpc.num_addresses}; "
                "fix: widen vpc_cidr or raise gpu_subnet_mask/public_subnet_mask"
            ]
        return []
