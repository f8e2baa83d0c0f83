"""What the runner knows of a job on this node: its record (a JSON file per job, written by ``start`` and
the supervisor) and its unit's state as systemd reports it; together, the one-line JSON of ``status``.

A transient unit that ended successfully is unloaded by systemd soon after; one that failed stays until
``reset-failed``; both vanish at a reboot. The record survives all three, so ``status`` can still say how a
job ended once systemd has forgotten it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from jobs.unit import unit_name

ACTIVE_STATES = ("active", "activating", "deactivating", "reloading")
CLD_EXITED = "1"
"""ExecMainCode of a main process that exited (rather than was killed by a signal)."""


def record_path(state_dir: str, job: str) -> Path:
    return Path(state_dir) / f"{job}.json"


def read_record(state_dir: str, job: str) -> dict[str, Any] | None:
    try:
        data = json.loads(record_path(state_dir, job).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_record(state_dir: str, job: str, record: dict[str, Any]) -> None:
    """Write, then rename: a reader never sees half a record."""
    directory = Path(state_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = record_path(state_dir, job)
    temporary = directory / f".{path.name}.{os.getpid()}"
    temporary.write_text(json.dumps(record, sort_keys=True) + "\n")
    os.replace(temporary, path)


def update_record(state_dir: str, job: str, **changes: Any) -> None:
    record = read_record(state_dir, job) or {}
    record.update(changes)
    write_record(state_dir, job, record)


def systemctl_show(systemctl: str, unit: str) -> dict[str, str]:
    """The unit's properties from ``systemctl show``; empty when systemctl cannot answer."""
    properties = "LoadState,ActiveState,Result,ExecMainCode,ExecMainStatus"
    try:
        done = subprocess.run(
            [systemctl, "show", unit, f"--property={properties}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if done.returncode != 0:
        return {}
    shown = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            shown[key.strip()] = value.strip()
    return shown


def job_status(systemctl: str, state_dir: str, job: str, instance_id: str | None) -> dict[str, Any]:
    """The ``status`` object of the job document (see scripts/node/README.md, "Training jobs")."""
    unit = unit_name(job)
    shown = systemctl_show(systemctl, unit)
    record = read_record(state_dir, job) or {}
    recorded_exit = record.get("exit_code")
    state: str
    result: str | None
    exit_code: int | None = None
    if shown.get("LoadState") == "loaded":
        state = shown.get("ActiveState") or "unknown"
        result = shown.get("Result") or None
        if state not in ACTIVE_STATES:
            if shown.get("ExecMainCode") == CLD_EXITED and (shown.get("ExecMainStatus") or "").isdigit():
                exit_code = int(shown["ExecMainStatus"])
            elif isinstance(recorded_exit, int):
                exit_code = recorded_exit
    elif record:
        # systemd has forgotten the unit (ended successfully, or a reboot): the record says how it ended.
        if isinstance(recorded_exit, int):
            exit_code = recorded_exit
            state = "inactive" if recorded_exit == 0 else "failed"
            result = "success" if recorded_exit == 0 else "exit-code"
        else:
            state, result = "inactive", None
    else:
        state, result = "unknown", None
    return {
        "job": job,
        "instance_id": instance_id,
        "unit": unit,
        "state": state,
        "result": result,
        "exit_code": exit_code,
        "started_at": record.get("started_at"),
    }
