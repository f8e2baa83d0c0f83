# ruff: noqa: F811 - the moto fixtures are imported from their module and taken as parameters here
"""The health check counts the platform's units that are down: gpu_health.py in-process against moto, the recorded
GPU outputs of a healthy p4d, and a fake systemctl answering `show` for each unit. A dead unit is the metric
PlatformUnitsDown (per group, which the fleet's platform-units-down alarm reads), never an Unhealthy node."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest

from tests.node.health.test_gpu_health import NAMESPACE, REGION, Fleet, aws, fleet, health_of, replay_args  # noqa: F401

# isort: split
import gpu_health
from health.units import SERVED_UNIT, UNITS_DOWN_METRIC, WATCHER_UNITS, is_down

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


@pytest.fixture
def states(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "states"
    folder.mkdir()
    monkeypatch.setenv("UNIT_STATES", str(folder))
    (tmp_path / "systemctl").write_text(FAKE_SYSTEMCTL)
    (tmp_path / "systemctl").chmod(0o755)
    return folder


def run_check(fleet: Fleet, states: Path, *, service_file: Path | None = None) -> int:
    identity = ["--instance-id", fleet.instance_id, "--region", REGION, "--asg-name", fleet.asg_name]
    units = ["--systemctl", str(states.parent / "systemctl"), "--unit-recheck", "0"]
    units += ["--service-file", str(service_file or states / "no-service.json")]
    return gpu_health.main(["--once", *identity, *replay_args("p4d_healthy"), *units])


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
    assert looked_at[:2] == [f"show --property=LoadState,ActiveState,SubState,Result {unit}" for unit in WATCHER_UNITS]


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
    ],
    ids=["running", "failed", "ended-on-purpose", "killed", "not-installed", "restarting"],
)
def test_what_down_means(state: dict[str, str], down: bool) -> None:
    assert is_down(state) is down
