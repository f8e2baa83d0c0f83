"""The platform's long-running units as the health check sees them: how many are down (``PlatformUnitsDown``).

A dead termination or Spot watcher leaves the node itself fine (its GPUs answer, its jobs train) but breaks what
the platform does around it: no checkpoint before a Spot interruption or a scale-in, a termination hook left to
time out. So the check counts the units that are down and publishes the count (gpu_health, per Auto Scaling
group; the Monitoring stack's ``platform-units-down`` alarm), and never makes it a reason to replace the node:
replacing nodes would not mend a unit that fails everywhere, and would end the jobs on them.

The units: ``lifecycle-watcher.service`` and ``spot-watcher.service`` everywhere, ``gpu-service.service`` where
the node serves (service.json exists). From ``systemctl show``, a unit is down when

- it is not loaded, failed, ended other than on purpose (inactive with result ``success``: a watcher exits 0 once
  the node is leaving), or between a crash and its restart (``activating``/``auto-restart``). A unit down at the
  first look is looked at again ``--unit-recheck`` seconds later (above the units' ``RestartSec=5``), so that one
  caught between a crash and its restart is judged once it is back;
- systemd restarted it since the previous check (``NRestarts`` grew; none recorded: since boot). With
  ``Restart=on-failure`` a unit that crashes some time after each start never ends ``failed`` (the start limit
  counts starts within its interval) and a look now and then mostly sees it ``active``: the count of restarts
  is what shows the loop. A counter that went down was reset by a manual start: not a restart;
- it is ``activating`` (e.g. the service's ``ExecStartPre`` pulling its image) or ``deactivating`` (a planned
  stop) now and was in that same state, entered at the same moment (``StateChangeTimestampMonotonic``), at the
  previous check: stuck for a whole health interval. Once is not down.

What each unit looked like is kept between checks in ``--unit-state-dir`` (``layout.HEALTH_STATE_DIR``,
gpu-health.service's ``RuntimeDirectory=``, mode 0700, preserved between runs and gone at a reboot, like systemd's
own counters), as ``units.json`` replaced whole; a folder that is a link, or is not this user's own and private
to it, is not used (a warning; only what systemd says now counts then, as before there was a history). Replaying recorded outputs checks
nothing unless ``--systemctl`` is given; a ``systemctl`` that does not answer publishes nothing (a warning).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from layout import GPU_SERVICE_UNIT, HEALTH_STATE_DIR, PLATFORM_UNITS, SERVICE_FILE

from health.probe import run_command

LOG = logging.getLogger("gpu-health")

UNITS_DOWN_METRIC = "PlatformUnitsDown"
WATCHER_UNITS = PLATFORM_UNITS
SERVED_UNIT = GPU_SERVICE_UNIT
PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "StateChangeTimestampMonotonic")
RECHECK_S = 10.0
SYSTEMCTL_TIMEOUT_S = 30.0
STATE_FILE = "units.json"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
#: Kept from one check to the next, per unit.
REMEMBERED = ("ActiveState", "SubState", "NRestarts", "StateChangeTimestampMonotonic")
#: A unit on its way up or down: down only when it stays so from one check to the next.
PASSING_STATES = ("activating", "deactivating")

State = dict[str, str]


def add_unit_arguments(parser: argparse.ArgumentParser) -> None:
    units = parser.add_argument_group(f"the platform's units ({UNITS_DOWN_METRIC})")
    units.add_argument("--no-unit-check", action="store_true", help="do not check the platform's units")
    units.add_argument("--systemctl", help="default: systemctl; replayed outputs check the units only when given")
    units.add_argument("--service-file", default=SERVICE_FILE, help=f"{SERVED_UNIT} is checked where it exists")
    units.add_argument("--unit-recheck", type=float, default=RECHECK_S, help="seconds before a second look")
    units.add_argument(
        "--unit-state-dir", default=HEALTH_STATE_DIR, help="where the units' states are kept between checks"
    )


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


def restarts(state: Mapping[str, object]) -> int:
    value = state.get("NRestarts", 0)
    return int(value) if isinstance(value, (int, str)) and str(value).isdigit() else 0


def is_restarting(state: Mapping[str, str]) -> bool:
    """Between a crash and its restart (``auto-restart``, and ``auto-restart-queued`` of newer systemd)."""
    return state.get("ActiveState") == "activating" and state.get("SubState", "").startswith("auto-restart")


def is_down(state: Mapping[str, str]) -> bool:
    """Down by what systemd says now, whatever came before."""
    if state.get("LoadState") != "loaded" or state.get("ActiveState") == "failed":
        return True
    if state.get("ActiveState") == "inactive":
        return state.get("Result") != "success"
    if state.get("ActiveState") in PASSING_STATES:
        return is_restarting(state)
    return state.get("ActiveState") not in ("active", "reloading", "refreshing")


def why_down(state: Mapping[str, str], previous: Mapping[str, object] | None, *, history: bool = True) -> str | None:
    """Why the unit counts as down, given what it looked like at the previous check (None: not recorded, i.e. a new
    boot); None when it is up. Without ``history`` (no state folder to keep it in) only what systemd says now."""
    if is_down(state):
        return ""
    if not history:
        return None
    restarted = restarts(state) - restarts(previous or {})
    if restarted > 0:
        since = "the last check" if previous is not None else "boot"
        return f", restarted {restarted} times by systemd since {since}"
    stayed = (
        previous is not None
        and state.get("ActiveState") in PASSING_STATES
        and all(previous.get(key) == state.get(key) for key in ("ActiveState", "SubState"))
        and previous.get("StateChangeTimestampMonotonic") == state.get("StateChangeTimestampMonotonic")
    )
    return ", in that state since the last check" if stayed else None


def down_units(units: Sequence[str], read: Callable[[str], State | None]) -> tuple[list[str], dict[str, State]] | None:
    """The units of ``units`` that are down now, and what systemd said of each; None when a look failed."""
    states: dict[str, State] = {}
    for unit in units:
        state = read(unit)
        if state is None:
            return None
        states[unit] = state
    return [unit for unit in units if is_down(states[unit])], states


def _boot_id() -> str:
    try:
        return Path(BOOT_ID_FILE).read_text().strip()
    except OSError:
        return ""


def state_dir(path: str) -> Path | None:
    """``path``, created 0700 where missing; None (and a warning) when it is a link or not private to this user."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as err:
        LOG.warning("cannot create %s (%s): restarts are not compared with the last check", path, err)
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        LOG.warning(
            "%s is not a folder of this user's that only it can write: not used, restarts are not compared", path
        )
        return None
    return Path(path)


def load_previous(folder: Path | None) -> dict[str, dict[str, object]]:
    """What the units looked like at the previous check of this boot (nothing when unknown)."""
    if folder is None:
        return {}
    try:
        fd = os.open(folder / STATE_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return {}
    except OSError as err:
        LOG.warning("cannot read %s (%s): restarts are counted since boot", folder / STATE_FILE, err)
        return {}
    try:
        with os.fdopen(fd) as file:
            document = json.load(file)
    except (OSError, ValueError) as err:
        LOG.warning("cannot read %s (%s): restarts are counted since boot", folder / STATE_FILE, err)
        return {}
    if not isinstance(document, dict) or document.get("boot_id") != _boot_id():
        return {}
    units = document.get("units")
    if not isinstance(units, dict):
        return {}
    return {name: state for name, state in units.items() if isinstance(state, dict)}


def save_states(folder: Path | None, states: Mapping[str, Mapping[str, str]]) -> None:
    """The units' states for the next check, written to a temporary file and renamed over the last ones."""
    if folder is None:
        return
    document = {
        "boot_id": _boot_id(),
        "units": {unit: {key: state.get(key, "") for key in REMEMBERED} for unit, state in states.items()},
    }
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{STATE_FILE}.")
    try:
        with os.fdopen(fd, "w") as file:
            json.dump(document, file, sort_keys=True)
        os.replace(temporary, folder / STATE_FILE)
    except OSError as err:
        LOG.warning("cannot write %s (%s): the next check counts restarts since boot", folder / STATE_FILE, err)
        with contextlib.suppress(OSError):
            os.unlink(temporary)


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
    down_now, states = first
    if down_now:
        sleep(args.unit_recheck)
        second = down_units(down_now, read)
        if second is None:
            return None
        states.update(second[1])
    folder = state_dir(args.unit_state_dir)
    previous = load_previous(folder)
    down = 0
    for unit, state in states.items():
        why = why_down(state, previous.get(unit), history=folder is not None)
        if why is None:
            continue
        down += 1
        LOG.warning(
            "platform unit %s is down (%s, %s/%s, result %s%s); `journalctl -u %s` says why",
            unit, state.get("LoadState", "?"), state.get("ActiveState", "?"), state.get("SubState", "?"),
            state.get("Result", "?"), why, unit,
        )  # fmt: skip
    save_states(folder, states)
    return down
