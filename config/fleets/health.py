"""How a fleet's nodes are judged healthy: ``health`` (the node's GPU health check, scripts/node/gpu_health.py).

The node reads these settings from node.env (``node_env``); the launch lifecycle hook's timeout must
cover the bootstrap plus the DCGM level the node runs before it takes work (``launch_hook_timeout_seconds``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from config.base import Strict

#: Seconds the node allows each DCGM diagnostic level (scripts/node/health/dcgm.py, DCGM_LEVEL_TIMEOUT_S; a
#: test keeps both equal). NVIDIA's dcgmi diag reference gives level 1 "seconds", 2 "approximately two
#: minutes", 3 "approximately 15 minutes", 4 "extended, longer-running" (no figure): the budgets leave room.
DCGM_LEVEL_SECONDS = {1: 180, 2: 600, 3: 2700, 4: 4500}
#: The bootstrap without DCGM, worst case: the Lustre mount alone may take 24 minutes (lustre-mount.service's
#: TimeoutStartSec: the mount's 20, and on the bootstrap AMI the client's install), the scratch step up to 2 more
#: (waiting for the image's instance-store unit), plus agent, units and their settle time, EFA, the other checks
#: and Docker (scripts/node/README.md).
BOOTSTRAP_SECONDS = 2400
#: PutLifecycleHook's HeartbeatTimeout range is 30 to 7200 seconds.
MAX_HOOK_TIMEOUT_SECONDS = 7200
#: The default level at launch per role: training nodes get the medium diagnostic, inference the quick one.
DEFAULT_DCGM_LEVEL = {"training": 2, "inference": 1}


class DcgmMode(StrEnum):
    AUTO = "auto"  # run where dcgmi is installed; a diagnostic that did not run is a logged warning
    REQUIRED = "required"  # a diagnostic that did not run makes the node unhealthy
    OFF = "off"


class Health(Strict):
    """``dcgm_level``: the DCGM diagnostic run before a node takes work (1-4; default 2 for training,
    1 for inference; in service the node runs level 1). ``dcgm``: auto, required or off.
    ``extra_fatal_xids``: Xid codes this fleet treats as unhealthy on top of the catalog table
    (scripts/node/health/xid_catalog.csv). ``launch_hook_timeout_seconds``: the launch hook's timeout, by
    default the bootstrap's budget plus the level's."""

    dcgm_level: int | None = Field(default=None, ge=1, le=4, description="DCGM diagnostic levels are 1 to 4")
    dcgm: DcgmMode = DcgmMode.AUTO
    extra_fatal_xids: Annotated[list[Annotated[int, Field(ge=1, le=999)]], Field(max_length=32)] = Field(
        default_factory=list
    )
    launch_hook_timeout_seconds: int | None = Field(
        default=None, ge=30, le=MAX_HOOK_TIMEOUT_SECONDS, description="PutLifecycleHook's range"
    )

    @field_validator("extra_fatal_xids")
    @classmethod
    def _once(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError("an Xid code is listed twice; fix: list each code once")
        return value


def dcgm_level(health: Health, role: str) -> int:
    return health.dcgm_level or DEFAULT_DCGM_LEVEL[role]


def required_hook_seconds(health: Health, role: str, service_seconds: int = 0) -> int:
    """The bootstrap, its DCGM level and, on a served fleet, the wait for the service's health check."""
    return BOOTSTRAP_SECONDS + DCGM_LEVEL_SECONDS[dcgm_level(health, role)] + service_seconds


def health_problems(health: Health, role: str, service_seconds: int = 0) -> list[str]:
    """The launch hook's timeout against what the launch needs (one line each, the fleet's model adds the field)."""
    needed = required_hook_seconds(health, role, service_seconds)
    level = dcgm_level(health, role)
    given = health.launch_hook_timeout_seconds
    if given is None and needed > MAX_HOOK_TIMEOUT_SECONDS:
        return [
            f"@service.start_timeout_seconds: the launch would need {needed} s ({BOOTSTRAP_SECONDS} s bootstrap + "
            f"{DCGM_LEVEL_SECONDS[level]} s DCGM level {level} + {service_seconds} s service start), more than a "
            f"lifecycle hook's {MAX_HOOK_TIMEOUT_SECONDS} s; fix: lower service.start_timeout_seconds or "
            "health.dcgm_level"
        ]
    if given is not None and given < needed:
        service = f" + {service_seconds} s service start" if service_seconds else ""
        lower = "health.dcgm_level or service.start_timeout_seconds" if service_seconds else "health.dcgm_level"
        return [
            f"@health.launch_hook_timeout_seconds: {given} is shorter than the launch needs ({BOOTSTRAP_SECONDS} s "
            f"bootstrap + {DCGM_LEVEL_SECONDS[level]} s DCGM level {level}{service} = {needed} s); fix: raise it to "
            f"at least {needed} or lower {lower}"
        ]
    return []


def node_env(health: Health, role: str) -> dict[str, str]:
    """The node.env keys the user data writes for the health check (scripts/node/README.md)."""
    env = {"HEALTH_DCGM_LEVEL": str(dcgm_level(health, role)), "HEALTH_DCGM": health.dcgm.value}
    if health.extra_fatal_xids:
        env["HEALTH_EXTRA_FATAL_XIDS"] = ",".join(str(code) for code in health.extra_fatal_xids)
    return env
