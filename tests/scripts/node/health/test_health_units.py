"""The health check counts the platform's units that are down: gpu_health.py in-process against moto, the recorded
GPU outputs of a healthy p4d, and a fake systemctl answering `show` for each unit. A dead unit is the metric
PlatformUnitsDown (per group, which the fleet's platform-units-down alarm reads), never an Unhealthy node. What the
units looked like is kept from one check to the next (a state folder per test): a unit systemd restarted in between
is down, one passing through activating/deactivating is down only when it stays there from one check to the next."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest

from tests.scripts.node.health.support import NAMESPACE, REGION, Fleet, health_of, replay_args
from tests.scripts.node.helpers import UNIT_DIR, read_unit

# isort: split
import gpu_health
import layout
from health.units import PROPERTIES, SERVED_UNIT, STATE_FILE, UNITS_DOWN_METRIC, WATCHER_UNITS, check_units, is_down

# `systemctl show UNIT`: $UNIT_STATES/<unit> if the test wrote one (then <unit>.next from the next look on), else up.
FAKE_SYSTEMCTL = """#!/usr/bin/env bash
printf '%s\\n' "$*" >>"$UNIT_STATES/calls"
if [[ -n "${SYSTEMCTL_FAILS:-}" ]]; then
  echo "Failed to connect to bus: No such file or directory" >&2
  exit 1
fi
state="$UNIT_STATES/${*: -1}"
if [[ -f "$state" ]]; then
  cat "$state"
else
  printf 'LoadState=loaded\\nActiveState=active\\nSubState=running\\nResult=success\\n'
fi
[[ ! -f "$state.next" ]] || mv "$state.next" "$state"
"""
FAILED = "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\n"
RESTARTING = "LoadState=loaded\nActiveState=activating\nSubState=auto-restart\nResult=exit-code\n"
RUNNING = "LoadState=loaded\nActiveState=active\nSubState=running\nResult=success\n"
SHOW = f"show --property={','.join(PROPERTIES)}"


def shown(active: str, sub: str, *, restarts: int = 0, since: int = 1_000_000, result: str = "success") -> str:
    """`systemctl show` of a loaded unit: its state, entered at monotonic ``since`` µs, and systemd's restarts."""
    return (
        f"LoadState=loaded\nActiveState={active}\nSubState={sub}\nResult={result}\nNRestarts={restarts}\n"
        f"StateChangeTimestampMonotonic={since}\n"
    )


@pytest.fixture
def states(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "states"
    folder.mkdir()
    monkeypatch.setenv("UNIT_STATES", str(folder))
    (tmp_path / "systemctl").write_text(FAKE_SYSTEMCTL)
    (tmp_path / "systemctl").chmod(0o755)
    return folder


def unit_args(states: Path, service_file: Path | None = None) -> list[str]:
    units = ["--systemctl", str(states.parent / "systemctl"), "--unit-recheck", "0"]
    units += ["--unit-state-dir", str(states.parent / "health-state")]
    return [*units, "--service-file", str(service_file or states / "no-service.json")]


def run_check(fleet: Fleet, states: Path, *, service_file: Path | None = None) -> int:
    identity = ["--instance-id", fleet.instance_id, "--region", REGION, "--asg-name", fleet.asg_name]
    return gpu_health.main(["--once", *identity, *replay_args("p4d_healthy"), *unit_args(states, service_file)])


def count_down(states: Path) -> int | None:
    """One check of the units alone (as gpu_health runs it), its count."""
    args = gpu_health.build_parser().parse_args(["--expected-gpus", "8", *unit_args(states)])
    return check_units(args, sleep=lambda _s: None)


def published(asg_name: str, metric: str) -> list[float]:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    dimension = {"Name": "AutoScalingGroupName", "Value": asg_name}
    found = cloudwatch.list_metrics(Namespace=NAMESPACE, MetricName=metric, Dimensions=[dimension])["Metrics"]
    if not found:
        return []
    assert found[0]["Dimensions"] == [dimension]  # per fleet, like GpuHealthCheckFailed
    now = datetime.now(UTC)
    query = {"Id": "m", "MetricStat": {"Metric": found[0], "Period": 60, "Stat": "Maximum"}}
    data = cloudwatch.get_metric_data(
        MetricDataQueries=[query], StartTime=now - timedelta(minutes=5), EndTime=now + timedelta(minutes=5)
    )
    return data["MetricDataResults"][0]["Values"]


def test_a_failed_watcher_is_published_and_the_node_stays_healthy(
    fleet: Fleet, states: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (states / "spot-watcher.service").write_text(FAILED)

    assert run_check(fleet, states) == 0  # the GPUs are fine: exit 0, not Unhealthy
    assert health_of(fleet.instance_id) == "HEALTHY"
    assert published(fleet.asg_name, UNITS_DOWN_METRIC) == [1.0]
    assert published(fleet.asg_name, gpu_health.METRIC_NAME) == [0.0]
    assert "platform unit spot-watcher.service is down (loaded, failed/failed, result exit-code)" in caplog.text
    looked_at = (states / "calls").read_text().splitlines()
    assert looked_at[:2] == [f"{SHOW} {unit}" for unit in WATCHER_UNITS]


def test_the_service_counts_only_where_the_node_serves(fleet: Fleet, states: Path, tmp_path: Path) -> None:
    (states / SERVED_UNIT).write_text(FAILED)
    assert run_check(fleet, states) == 0
    assert published(fleet.asg_name, UNITS_DOWN_METRIC) == [0.0]  # no service.json: not this node's unit

    service_file = tmp_path / "service.json"
    service_file.write_text("{}")
    assert run_check(fleet, states, service_file=service_file) == 0
    assert max(published(fleet.asg_name, UNITS_DOWN_METRIC)) == 1.0


def test_a_unit_restarting_at_the_first_look_and_up_at_the_second_is_not_down(fleet: Fleet, states: Path) -> None:
    (states / "lifecycle-watcher.service").write_text(RESTARTING)
    (states / "lifecycle-watcher.service.next").write_text(RUNNING)

    assert run_check(fleet, states) == 0
    assert published(fleet.asg_name, UNITS_DOWN_METRIC) == [0.0]
    assert (states / "calls").read_text().count("lifecycle-watcher.service") == 2  # looked at twice


def test_a_systemctl_that_does_not_answer_publishes_no_count(
    fleet: Fleet, states: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SYSTEMCTL_FAILS", "1")
    assert run_check(fleet, states) == 0
    assert published(fleet.asg_name, UNITS_DOWN_METRIC) == []  # missing data: the alarm does not fire on it
    assert published(fleet.asg_name, gpu_health.METRIC_NAME) == [0.0]
    assert "the platform's units are not counted this time" in caplog.text


def test_replayed_outputs_check_no_unit_unless_told_and_the_bootstrap_never(fleet: Fleet) -> None:
    identity = ["--instance-id", fleet.instance_id, "--region", REGION, "--asg-name", fleet.asg_name]
    assert gpu_health.main(["--once", *identity, *replay_args("p4d_healthy")]) == 0
    assert published(fleet.asg_name, UNITS_DOWN_METRIC) == []
    assert gpu_health.build_parser().parse_args(["--expected-gpus", "8", "--no-unit-check"]).no_unit_check


@pytest.mark.parametrize(
    ("state", "down"),
    [
        ({"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "Result": "success"}, False),
        ({"LoadState": "loaded", "ActiveState": "failed", "SubState": "failed", "Result": "exit-code"}, True),
        # A watcher exits 0 once the node is leaving (Spot interruption handled, termination hook completed).
        ({"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead", "Result": "success"}, False),
        ({"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead", "Result": "signal"}, True),
        ({"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead", "Result": "success"}, True),
        ({"LoadState": "loaded", "ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code"}, True),
        # On its way: judged against the previous check (below), never down at one look.
        ({"LoadState": "loaded", "ActiveState": "activating", "SubState": "start-pre", "Result": "success"}, False),
        (
            {"LoadState": "loaded", "ActiveState": "deactivating", "SubState": "stop-sigterm", "Result": "success"},
            False,
        ),
    ],
    ids=["running", "failed", "ended-on-purpose", "killed", "not-installed", "restarting", "pulling", "stopping"],
)
def test_what_down_means(state: dict[str, str], down: bool) -> None:
    assert is_down(state) is down


# ---------------------------------------------------------------------------------------------
# From one check to the next
# ---------------------------------------------------------------------------------------------


def test_a_crash_loop_that_looks_active_is_down_by_its_restarts(
    fleet: Fleet, states: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Restart=on-failure, RestartSec=5: a watcher that dies a minute after each start never ends failed (the start
    # limit counts starts within its interval), and a look in between mostly finds it active/running.
    watcher = states / "spot-watcher.service"
    watcher.write_text(shown("active", "running", restarts=0))
    assert run_check(fleet, states) == 0
    assert published(fleet.asg_name, UNITS_DOWN_METRIC) == [0.0]

    watcher.write_text(shown("active", "running", restarts=4, since=9_000_000))  # 4 crashes since the last check
    assert run_check(fleet, states) == 0
    # Newest minute first: this check's 1 (the two checks may fall in one minute or in two).
    assert published(fleet.asg_name, UNITS_DOWN_METRIC)[0] == 1.0
    assert health_of(fleet.instance_id) == "HEALTHY"
    assert (
        "platform unit spot-watcher.service is down (loaded, active/running, result success, restarted 4 times by "
        "systemd since the last check)"
    ) in caplog.text

    caplog.clear()
    assert count_down(states) == 0  # no restart since: up again
    assert "is down" not in caplog.text


def test_restarts_before_the_first_check_count_and_a_reset_counter_does_not(states: Path) -> None:
    watcher = states / "lifecycle-watcher.service"
    watcher.write_text(shown("active", "running", restarts=2))
    assert count_down(states) == 1  # nothing recorded yet (a new boot): restarted since boot
    watcher.write_text(shown("active", "running", restarts=0, since=5_000_000))  # someone ran systemctl restart
    assert count_down(states) == 0
    watcher.write_text(shown("active", "running", restarts=1, since=6_000_000))
    assert count_down(states) == 1


@pytest.mark.parametrize(
    ("active", "sub"),
    [("deactivating", "stop-sigterm"), ("activating", "start-pre")],
    ids=["planned-stop", "image-pull"],
)
def test_a_unit_on_its_way_is_down_only_when_it_stays_so_until_the_next_check(
    states: Path, active: str, sub: str
) -> None:
    service_file = states / "service.json"
    service_file.write_text("{}")
    unit = states / SERVED_UNIT
    unit.write_text(shown(active, sub, since=7_000_000))
    args = gpu_health.build_parser().parse_args(["--expected-gpus", "8", *unit_args(states, service_file)])

    assert check_units(args, sleep=lambda _s: None) == 0  # one look at a stop or a pull: not down
    unit.write_text(shown("active", "running", since=8_000_000))
    assert check_units(args, sleep=lambda _s: None) == 0
    unit.write_text(shown(active, sub, since=9_000_000))  # again, but a new one: still not down
    assert check_units(args, sleep=lambda _s: None) == 0
    assert check_units(args, sleep=lambda _s: None) == 1  # the same one a whole interval later: stuck


def test_the_state_is_kept_in_a_private_folder_and_never_through_a_link(
    states: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (states / "spot-watcher.service").write_text(shown("active", "running", restarts=3))
    assert count_down(states) == 1
    folder = tmp_path / "health-state"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    saved = json.loads((folder / STATE_FILE).read_text())
    assert saved["units"]["spot-watcher.service"]["NRestarts"] == "3"
    assert [p.name for p in folder.iterdir()] == [STATE_FILE]  # the temporary file was renamed

    # A folder replaced by a link (or one others may write) is not used: nothing is written through it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / STATE_FILE).unlink()
    folder.rmdir()
    folder.symlink_to(elsewhere)
    assert count_down(states) == 0  # no history to compare with: only what systemd says now
    assert list(elsewhere.iterdir()) == []
    assert "is not a folder of this user's that only it can write" in caplog.text


def test_gpu_health_service_may_write_its_state_folder_and_keeps_it_between_runs() -> None:
    """systemd.exec(5): ProtectSystem=strict leaves RuntimeDirectory= writable; a oneshot stops after each run, so
    RuntimeDirectoryPreserve=yes keeps the folder until the reboot that also resets systemd's NRestarts."""
    service = read_unit(UNIT_DIR / "gpu-health.service")["Service"]
    assert service["ProtectSystem"] == ["strict"]
    assert [f"/run/{d}" for d in service["RuntimeDirectory"][0].split()] == [layout.HEALTH_STATE_DIR]
    assert service["RuntimeDirectoryMode"] == ["0700"]
    assert service["RuntimeDirectoryPreserve"] == ["yes"]
    assert gpu_health.build_parser().parse_args(["--expected-gpus", "8"]).unit_state_dir == layout.HEALTH_STATE_DIR
    assert os.path.dirname(layout.HEALTH_STATE_DIR) == "/run/gpu-platform"  # beside the checkpoint lock
