"""Fake systemd for the bootstrap's tests: systemctl and journalctl as small shell scripts over a state folder.

A unit given a command (``FakeUnits.runs``) really runs it when it is started (``enable --now`` or ``start``),
as systemd would: its ``pre`` first (ExecStartPre: a failure fails the start, like systemctl's "Job ... failed"),
then the command in a process group of its own, its output appended to the file the installed unit file names
in ``StandardOutput=append:`` (under ``UNIT_LOG_ROOT``, standing for /), restarted after a failure as many times
as the test allows (``NRestarts``). ``show`` answers from that process: active/running while it runs,
failed/failed once it exited non-zero, inactive/dead after exit 0. A unit without a command is simply active
(running, or waiting for a timer). Every call is appended to $FAKE_CALLS, as the bootstrap's other fakes do.

Two more kinds, both ``Type=oneshot`` with ``RemainAfterExit=yes`` as their real units are:

- ``FakeUnits.oneshot``: ``start`` runs the command in the foreground and fails like systemctl does when it fails
  (``ExecMainStatus`` in ``show`` is its exit status): lustre-mount.service;
- ``FakeUnits.booting``: a unit of the image that systemd started at boot, before the bootstrap ran (the test
  starts it): ``activating``/``start`` while its command runs, ``active``/``exited`` once it ended well, enabled.

``show`` also says ``LoadState``: ``loaded`` for a unit the test declared or the bootstrap installed, else
``not-found`` (and inactive), as systemd answers for a unit the image does not have.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

# $FAKE_UNITS_DIR/<unit>/: command, pre, restarts, oneshot, booting (given by the test); pid, rc, nrestarts
# (written here).
FAKE_SYSTEMCTL = """#!/usr/bin/env bash
printf 'systemctl %s\\n' "$*" >>"$FAKE_CALLS"
if [[ "$*" == "${FAKE_SYSTEMCTL_TERM:-}" ]]; then
  kill -TERM "$FAKE_BOOTSTRAP_PID"
fi
if [[ "$*" == "${FAKE_SYSTEMCTL_FAIL:-}" ]]; then
  echo "Job for ${*: -1} failed because the control process exited with error code." >&2
  exit 1
fi
unit="${*: -1}"
dir="$FAKE_UNITS_DIR/$unit"
if [[ "$1" == start || "$*" == "enable --now $unit" ]] && [[ -f "$dir/command" && -f "$dir/oneshot" ]]; then
  rc=0
  bash "$dir/command" </dev/null >>"$dir/output" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
  if ((rc != 0)); then
    echo "Job for ${unit} failed because the control process exited with error code." >&2
    exit 1
  fi
elif [[ "$1" == start || "$*" == "enable --now $unit" ]] && [[ -f "$dir/command" && ! -f "$dir/booting" ]]; then
  out="$(sed -n 's/^StandardOutput=append://p' "$SYSTEMD_UNIT_DIR/$unit" | tail -n 1)"
  out="${UNIT_LOG_ROOT}${out:?the fake runs only units that name their log file}"
  mkdir -p "$(dirname "$out")"
  rm -f "$dir/rc" "$dir/nrestarts"
  if [[ -f "$dir/pre" ]] && ! bash "$dir/pre" </dev/null >>"$out" 2>&1; then
    echo 1 >"$dir/rc"
    echo "Job for ${unit} failed because the control process exited with error code." >&2
    exit 1
  fi
  setsid "$FAKE_UNIT_RUNNER" "$dir" </dev/null >>"$out" 2>&1 &
  echo "$!" >"$dir/pid"
fi
if [[ "$1" == show ]]; then
  rc="$(cat "$dir/rc" 2>/dev/null || true)"
  restarts="$(cat "$dir/nrestarts" 2>/dev/null || echo 0)"
  if [[ ! -d "$dir" && ! -f "$SYSTEMD_UNIT_DIR/$unit" ]]; then
    printf 'LoadState=not-found\\nActiveState=inactive\\nSubState=dead\\nResult=success\\nNRestarts=0\\n'
    printf 'UnitFileState=\\nInactiveExitTimestampMonotonic=0\\n'
    exit 0
  fi
  echo LoadState=loaded
  if [[ -f "$dir/oneshot" || -f "$dir/booting" ]]; then
    started=0
    [[ ! -f "$dir/pid" && -z "$rc" ]] || started=4000000
    printf 'UnitFileState=enabled\\nInactiveExitTimestampMonotonic=%s\\nExecMainStatus=%s\\n' "$started" "${rc:-0}"
    if [[ -z "$rc" && "$started" == 0 ]]; then
      printf 'ActiveState=inactive\\nSubState=dead\\nResult=success\\n'
    elif [[ -z "$rc" ]]; then
      printf 'ActiveState=activating\\nSubState=start\\nResult=success\\n'
    elif [[ "$rc" == 0 ]]; then
      printf 'ActiveState=active\\nSubState=exited\\nResult=success\\n'
    else
      printf 'ActiveState=failed\\nSubState=failed\\nResult=exit-code\\n'
    fi
  elif [[ -z "$rc" ]]; then
    sub=running
    [[ "$unit" != *.timer ]] || sub=waiting
    printf 'ActiveState=active\\nSubState=%s\\nResult=success\\nNRestarts=%s\\n' "$sub" "$restarts"
  elif [[ "$rc" == 0 ]]; then
    printf 'ActiveState=inactive\\nSubState=dead\\nResult=success\\nNRestarts=%s\\n' "$restarts"
  else
    printf 'ActiveState=failed\\nSubState=failed\\nResult=exit-code\\nNRestarts=%s\\n' "$restarts"
  fi
fi
"""
# The unit's main process: its command, run again after a failure while the test allows restarts.
FAKE_UNIT_RUNNER = """#!/usr/bin/env bash
dir="$1"
restarts=0
allowed="$(cat "$dir/restarts" 2>/dev/null || echo 0)"
while :; do
  bash "$dir/command"
  rc=$?
  ((rc != 0 && restarts < allowed)) || break
  restarts=$((restarts + 1))
  echo "$restarts" >"$dir/nrestarts"
done
echo "$rc" >"$dir/rc"
"""
# systemd's own lines about a unit whose process ended in failure; none for a unit that runs.
FAKE_JOURNALCTL = """#!/usr/bin/env bash
printf 'journalctl %s\\n' "$*" >>"$FAKE_CALLS"
unit=""
while (($#)); do
  [[ "$1" != --unit ]] || unit="$2"
  shift
done
rc="$(cat "$FAKE_UNITS_DIR/$unit/rc" 2>/dev/null || true)"
if [[ -z "$rc" || "$rc" == 0 ]]; then
  echo "-- No entries --"
  exit 0
fi
echo "2026-11-24T10:33:16+0000 ip-10-0-0-1 systemd[1]: ${unit}: Main process exited, code=exited, status=${rc}/FAILURE"
echo "2026-11-24T10:33:16+0000 ip-10-0-0-1 systemd[1]: ${unit}: Failed with result 'exit-code'."
"""


class FakeUnits:
    """The fake systemctl and journalctl, and the units the test makes run a process."""

    def __init__(self, root: Path) -> None:
        self.state = root / "units"
        self.state.mkdir()
        self.log_root = root / "root"  # UNIT_LOG_ROOT: the units' /var/log/... files are under it

    def install(self, bin_dir: Path) -> dict[str, str]:
        env = {"FAKE_UNITS_DIR": str(self.state), "UNIT_LOG_ROOT": str(self.log_root)}
        for variable, name, text in (
            ("SYSTEMCTL_BIN", "systemctl", FAKE_SYSTEMCTL),
            ("JOURNALCTL_BIN", "journalctl", FAKE_JOURNALCTL),
            ("FAKE_UNIT_RUNNER", "fake-unit-runner", FAKE_UNIT_RUNNER),
        ):
            path = bin_dir / name
            path.write_text(text)
            path.chmod(0o755)
            env[variable] = str(path)
        return env

    def runs(self, unit: str, command: str, *, pre: str | None = None, restarts: int = 0) -> None:
        """``unit`` runs ``command`` (bash) when started, ``pre`` before it, restarted at most ``restarts`` times."""
        folder = self.state / unit
        folder.mkdir(exist_ok=True)
        (folder / "command").write_text(command)
        (folder / "restarts").write_text(str(restarts))
        if pre is not None:
            (folder / "pre").write_text(pre)

    def oneshot(self, unit: str, command: str) -> None:
        """``unit`` is a Type=oneshot unit: ``start`` runs ``command`` (bash) to its end, and fails when it fails."""
        self.runs(unit, command)
        (self.state / unit / "oneshot").write_text("")

    def booting(self, unit: str, command: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        """The image's ``unit``, which systemd started at boot: ``command`` (bash) runs from now on, in ``env``."""
        folder = self.state / unit
        folder.mkdir(exist_ok=True)
        (folder / "command").write_text(command)
        (folder / "booting").write_text("")
        process = subprocess.Popen(
            [env["FAKE_UNIT_RUNNER"], str(folder)], env=env, start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        (folder / "pid").write_text(str(process.pid))
        return process

    def log(self, path: str) -> Path:
        """Where a unit's log file (an absolute path on the node, e.g. layout.SERVICE_LOG) is in the test."""
        return self.log_root / path.lstrip("/")


def stop_units(state: Path) -> None:
    """Ends the process group of every unit the fake systemctl started with ``state`` as FAKE_UNITS_DIR."""
    for pid_file in state.glob("*/pid"):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
