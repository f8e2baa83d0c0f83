"""What a healthy deployment of one environment looks like, in AWS names (no AWS call here).

Fleets: one Auto Scaling group per fleet, named ``ResourceNames.asg_name_prefix + fleet.name``,
with the sizes the fleet can have between two deploys: the configured min and max or those of one
of its scheduled actions (a Capacity Block fleet: 0 outside its window, its size inside), and the
configured desired capacity only where nothing moves it (no scaling policy, no schedule, no block);
otherwise any desired capacity between min and max.

File systems are the environment's when they carry its ``Environment`` and ``Project`` tags (which
the stacks propagate) or a Name tag with its prefix.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from config import Environment
from config.fleets import Fleet
from config.naming import ResourceNames

#: The stacks every environment has (stacks/platform_stage.py); other ``<env>-*`` stacks are checked when present.
REQUIRED_STACKS = ("Security", "Network", "Storage", "Image", "Fleets", "Monitoring")


@dataclass(frozen=True)
class FleetExpectation:
    """The capacity one fleet's Auto Scaling group may have between two deploys.

    ``min_size``/``max_size`` as deployed, or as one of ``scheduled`` sets them (``(min, max)`` of
    a scheduled action; None where the action leaves that bound alone); ``desired`` None: any
    value between the group's min and max (scaling policies and schedules move it).
    """

    group: str
    min_size: int
    max_size: int
    desired: int | None = None
    scheduled: tuple[tuple[int | None, int | None], ...] = ()

    def allows(self, min_size: int, max_size: int, desired: int) -> bool:
        mins = {self.min_size, *(lo for lo, _ in self.scheduled if lo is not None)}
        maxes = {self.max_size, *(hi for _, hi in self.scheduled if hi is not None)}
        in_bounds = min_size <= desired <= max_size if self.desired is None else desired == self.desired
        return min_size in mins and max_size in maxes and in_bounds

    def describe(self) -> str:
        text = f"min {self.min_size} max {self.max_size}"
        if self.desired is not None:
            text += f" desired {self.desired}"
        for lo, hi in self.scheduled:
            text += (
                " or scheduled" + (f" min {lo}" if lo is not None else "") + (f" max {hi}" if hi is not None else "")
            )
        return text


@dataclass(frozen=True)
class Expectations:
    """What a healthy deployment of one environment looks like, in AWS names."""

    environment: str
    account: str
    region: str
    stack_prefix: str
    required_stacks: tuple[str, ...]
    asg_prefix: str
    fleets: tuple[FleetExpectation, ...]
    #: ``ResourceNames.prefix`` and a dash: the start of alarm names and file system Name tags.
    resource_prefix: str
    ami_parameter: str
    #: An FSx file system is the environment's when it carries all these tags, or a Name tag with ``resource_prefix``.
    file_system_tags: tuple[tuple[str, str], ...]
    trail_name: str
    #: Finding no file system is a failure: every config declares one (``storage.file_system`` is required).
    file_system_expected: bool = True
    #: Prefixes of environments whose names extend this one's (``dev-2`` for ``dev``): their resources are not ours.
    foreign_prefixes: tuple[str, ...] = ()

    def owns(self, name: str, prefix: str) -> bool:
        return name.startswith(prefix) and not name.startswith(self.foreign_prefixes)


def fleet_expectations(fleets: Iterable[Fleet], names: ResourceNames) -> tuple[FleetExpectation, ...]:
    """One expectation per configured fleet; its group is ``ResourceNames.asg_name_prefix + fleet.name``
    (the fleet stack must name it so)."""
    return tuple(fleet_expectation(f"{names.asg_name_prefix}{fleet.name}", fleet) for fleet in fleets)


def fleet_expectation(group: str, fleet: Fleet) -> FleetExpectation:
    """The sizes ``fleet``'s group ``group`` may have between two deploys."""
    capacity = fleet.capacity
    if fleet.capacity_block is not None:
        # Empty outside the block's window; its scheduled actions size it to max for the window.
        return FleetExpectation(group, 0, 0, scheduled=((capacity.max, capacity.max),))
    scaling = fleet.scaling
    schedules = tuple(scaling.schedules) if scaling else ()
    moved = bool(schedules) or (scaling is not None and bool(scaling.target_tracking or scaling.step))
    return FleetExpectation(
        group,
        capacity.min,
        capacity.max,
        desired=None if moved else capacity.desired,
        scheduled=tuple((action.min, action.max) for action in schedules),
    )


def expectations_for(
    env: Environment, *, region: str | None = None, other_environments: Iterable[str] = ()
) -> Expectations:
    """Everything the checks compare against, from the environment's config and the shared names."""
    names = ResourceNames.of(env)
    if region:
        names = replace(names, region=region)
    foreign: list[str] = []
    for other in other_environments:
        if other != env.name and other.startswith(f"{env.name}-"):
            other_names = replace(names, env=other)
            foreign += [f"{other}-", other_names.asg_name_prefix]
    tags = {"Environment": env.name}
    if env.tags.get("Project"):
        tags["Project"] = env.tags["Project"]
    return Expectations(
        environment=env.name,
        account=env.account,
        region=names.region,
        stack_prefix=f"{env.name}-",
        required_stacks=tuple(f"{env.name}-{stack}" for stack in REQUIRED_STACKS),
        asg_prefix=names.asg_name_prefix,
        fleets=fleet_expectations(env.fleets, names),
        resource_prefix=f"{names.prefix}-",
        ami_parameter=names.ami_parameter,
        file_system_tags=tuple(sorted(tags.items())),
        trail_name=names.trail_name,
        foreign_prefixes=tuple(foreign),
    )
