"""The platform's long-running units as the health check sees them: how many are down (``PlatformUnitsDown``).

A dead termination or Spot watcher leaves the node itself fine (its GPUs answer, its jobs train) but breaks what
the platform does around it: no checkpoint before a Spot interruption or a scale-in, a termination hook left to
time out. So the check counts the units that are down and publishes the count (gpu_health, per Auto Scaling
group; the Monitoring stack's ``platform-units-down`` alarm), and never makes it a reason to replace the node:
replacing nodes would not mend a unit that fails everywhere, and would end the jobs on them.

The units: ``lifecycle-watcher.service`` and ``spot-watcher.service`` everywhere, ``gpu-service.service`` where
the node serves (service.json exists). Down, from ``systemctl show``: not loaded, failed, or neither active nor
ended on purpose (inactive with result ``success``: a watcher exits 0 once the node is leaving). A unit down at
the first look is looked at again ``--unit-recheck`` seconds later (above the units' ``RestartSec=5``), so that a
unit between a crash and its restart does not count. Replaying recorded outputs checks nothing unless
``--systemctl`` is given; a ``systemctl`` that does not answer publishes nothing (a warning in the log).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable, Sequence

from layout import GPU_SERVICE_UNIT, PLATFORM_UNITS, SERVICE_FILE

from health.probe import run_command

LOG = logging.getLogger("gpu-health")

UNITS_DOWN_METRIC = "PlatformUnitsDown"
WATCHER_UNITS = PLATFORM_UNITS
SERVED_UNIT = GPU_SERVICE_UNIT
PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result")
RECHECK_S = 10.0
SYSTEMCTL_TIMEOUT_S = 30.0

State = dict[str, str]


def add_unit_arguments(parser: argparse.ArgumentParser) -> None:
    units = parser.add_argument_group(f"the platform's units ({UNITS_DOWN_METRIC})")
    units.add_argument("--no-unit-check", action="store_true", help="do not check the platform's units")
    units.add_argument("--systemctl", help="default: systemctl; replayed outputs check the units only when given")
    units.add_argument("--service-file", default=SERVICE_FILE, help=f"{SERVED_UNIT} is checked where it exists")
    units.add_argument("--unit-recheck", type=float, default=RECHECK_S, help="seconds before a second look")


def units_to_check(service_file: str) -> tuple[str, ...]:
    return WATCHER_UNITS + ((SERVED_UNIT,) if os.path.exists(service_file) else ())


def read_state(systemctl: str, unit: str) -> State | None:
    """The unit's PROPERTIES (``systemctl show``); None when systemctl does not answer."""
    result = run_command((systemctl, "show", f"--property={','.join(PROPERTIES)}", unit), SYSTEMCTL_TIMEOUT_S)
    if result.returncode != 0:
        why = "timed out" if result.timed_out else "not found" if result.not_found else f"exited {result.returncode}"
        LOG.warning("%s show %s %s: the platform's units are not counted this time", systemctl, unit, why)
        return None
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


def is_down(state: State) -> bool:
    if state.get("LoadState") != "loaded" or state.get("ActiveState") == "failed":
        return True
    if state.get("ActiveState") == "inactive":
        return state.get("Result") != "success"
    return state.get("ActiveState") not in ("active", "reloading", "refreshing")


def down_units(units: Sequence[str], read: Callable[[str], State | None]) -> tuple[list[str], dict[str, State]] | None:
    """The units of ``units`` that are down, and what systemd said of each; None when a look failed."""
    states: dict[str, State] = {}
    for unit in units:
        state = read(unit)
        if state is None:
            return None
        states[unit] = state
    return [unit for unit in units if is_down(states[unit])], states


def check_units(args: argparse.Namespace, sleep: Callable[[float], None] = time.sleep) -> int | None:
    """How many of the platform's units are down (logged by name); None when not checked."""
    if args.no_unit_check:
        return None
    if args.systemctl is None and args.nvidia_smi_output is not None:
        LOG.info("replayed outputs: the platform's units are not checked (--systemctl checks them)")
        return None
    systemctl = args.systemctl or "systemctl"

    def read(unit: str) -> State | None:
        return read_state(systemctl, unit)

    first = down_units(units_to_check(args.service_file), read)
    if first is None:
        return None
    if first[0]:
        sleep(args.unit_recheck)
        first = down_units(first[0], read)
        if first is None:
            return None
    down, states = first
    for unit in down:
        state = states[unit]
        LOG.warning(
            "platform unit %s is down (%s, %s/%s, result %s); `journalctl -u %s` says why",
            unit, state.get("LoadState", "?"), state.get("ActiveState", "?"), state.get("SubState", "?"),
            state.get("Result", "?"), unit,
        )  # fmt: skip
    return len(down)
