"""lifecycle_watcher.py: the termination window. A fake IMDS reports the target lifecycle state;
the Auto Scaling calls go to a botocore Stubber (exact parameters, in process) or, for the
command line, to the moto-backed fake endpoint with the real checkpoint hook and a stand-in trainer."""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from config.naming import terminate_hook_name
from tests.scripts.node.fake_aws import FakeAws, LifecycleFleet
from tests.scripts.node.helpers import NODE_DIR, FakeImds
from tests.scripts.node.training_job import TrainingJob

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import lifecycle_watcher
from imds_client import ImdsClient
from lifecycle_watcher import TARGET_STATE_PATH, LifecycleWatcher, run_with_heartbeats

INSTANCE_ID = "i-0123456789abcdef0"
ASG = "gpu-platform-dev-p4d"
HOOK = terminate_hook_name(ASG)
HOOK_PARAMS = {"LifecycleHookName": HOOK, "AutoScalingGroupName": ASG, "InstanceId": INSTANCE_ID}

# Waits for a file to appear, then exits with the code given: a hook that runs exactly as long as
# the test wants. Never released within 10 s: exits 99, so a test that forgot it fails.
WAIT_FOR_FILE = """
import os, sys, time
deadline = time.monotonic() + 10
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.01)
sys.exit(int(sys.argv[2]) if os.path.exists(sys.argv[1]) else 99)
"""


@pytest.fixture
def imds() -> Iterator[FakeImds]:
    with FakeImds() as server:
        server.set("/latest/meta-data/instance-id", INSTANCE_ID)
        yield server


@pytest.fixture
def autoscaling(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Stubber]]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("autoscaling", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def watcher_for(imds: FakeImds, client: Any, command: list[str], **kwargs: float) -> LifecycleWatcher:
    return LifecycleWatcher(
        ImdsClient(imds.url, timeout_s=2),
        hook_command=command,
        hook_name=HOOK,
        asg_name=ASG,
        instance_id=None,
        client_factory=lambda: client,
        **kwargs,
    )


def waiting_hook(tmp_path: Path, code: int = 0) -> tuple[list[str], Path]:
    release = tmp_path / "release"
    return [sys.executable, "-c", WAIT_FOR_FILE, str(release), str(code)], release


class NeverCalled:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"no AWS call expected, got {name}")


def test_no_target_state_does_nothing_within_bounded_polls(imds: FakeImds, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    watcher = watcher_for(imds, NeverCalled(), ["touch", str(ran)])

    assert watcher.run(0.001, max_polls=5) == 0

    assert watcher.polls == 5
    assert not ran.exists()
    assert imds.gets == [(TARGET_STATE_PATH, 404)] * 5
    assert imds.token_puts == 1


def test_in_service_does_nothing(imds: FakeImds, tmp_path: Path) -> None:
    imds.set(TARGET_STATE_PATH, "InService")
    ran = tmp_path / "ran"
    assert watcher_for(imds, NeverCalled(), ["touch", str(ran)]).run(0.001, max_polls=3) == 0
    assert not ran.exists()


def test_terminated_runs_the_hook_with_heartbeats_then_continues(
    imds: FakeImds, autoscaling: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = autoscaling
    command, release = waiting_hook(tmp_path)
    stubber.add_response("record_lifecycle_action_heartbeat", {}, HOOK_PARAMS)
    stubber.add_response("complete_lifecycle_action", {}, {**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"})
    # The hook finishes only once the heartbeat was sent: exactly one heartbeat, then CONTINUE.
    client.meta.events.register("after-call.auto-scaling.RecordLifecycleActionHeartbeat", lambda **_: release.touch())
    watcher = watcher_for(imds, client, command, heartbeat_after_s=0.05, heartbeat_interval_s=30)
    imds.set(TARGET_STATE_PATH, "InService")
    assert watcher.run(0.001, max_polls=2) == 0  # nothing yet
    imds.set(TARGET_STATE_PATH, "Terminated")

    assert watcher.run(0.001, max_polls=50) == 0

    assert watcher.hook_exit == 0
    assert watcher.heartbeats == 1
    assert release.exists()


def test_a_quick_hook_needs_no_heartbeat(imds: FakeImds, autoscaling: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stubber = autoscaling
    stubber.add_response("complete_lifecycle_action", {}, {**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"})
    imds.set(TARGET_STATE_PATH, "Terminated")
    ran = tmp_path / "ran"
    watcher = watcher_for(imds, client, ["touch", str(ran)], heartbeat_after_s=30)

    assert watcher.run(0.001, max_polls=5) == 0
    assert ran.exists()
    assert watcher.heartbeats == 0


def test_a_failing_hook_still_continues(imds: FakeImds, autoscaling: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stubber = autoscaling
    stubber.add_response("complete_lifecycle_action", {}, {**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"})
    imds.set(TARGET_STATE_PATH, "Terminated")
    watcher = watcher_for(imds, client, [sys.executable, "-c", "raise SystemExit(3)"])

    assert watcher.run(0.001, max_polls=5) == 0
    assert watcher.hook_exit == 3


def test_a_hook_past_its_timeout_is_killed_and_the_node_continues(
    imds: FakeImds, autoscaling: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = autoscaling
    stubber.add_response("complete_lifecycle_action", {}, {**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"})
    imds.set(TARGET_STATE_PATH, "Terminated")
    command, _never_released = waiting_hook(tmp_path)
    watcher = watcher_for(imds, client, command, hook_timeout_s=0.3, heartbeat_after_s=30)

    started = time.monotonic()
    assert watcher.run(0.001, max_polls=5) == 0
    assert time.monotonic() - started < 5
    assert watcher.hook_exit == 124


def test_complete_refused_exits_3(imds: FakeImds, autoscaling: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stubber = autoscaling
    stubber.add_client_error(
        "complete_lifecycle_action",
        service_error_code="ValidationError",
        service_message=f"No active Lifecycle Action found with instance ID {INSTANCE_ID}",
        expected_params={**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"},
    )
    imds.set(TARGET_STATE_PATH, "Terminated")
    assert watcher_for(imds, client, ["true"]).run(0.001, max_polls=5) == 3


def test_a_failed_heartbeat_is_logged_and_the_hook_goes_on(
    imds: FakeImds, autoscaling: tuple[Any, Stubber], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client, stubber = autoscaling
    command, release = waiting_hook(tmp_path)
    stubber.add_client_error("record_lifecycle_action_heartbeat", "Throttling", "Rate exceeded", 400, HOOK_PARAMS)
    stubber.add_response("complete_lifecycle_action", {}, {**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"})
    client.meta.events.register("after-call.auto-scaling.RecordLifecycleActionHeartbeat", lambda **_: release.touch())
    imds.set(TARGET_STATE_PATH, "Terminated")
    watcher = watcher_for(imds, client, command, heartbeat_after_s=0.05, heartbeat_interval_s=30)

    assert watcher.run(0.001, max_polls=5) == 0
    assert watcher.heartbeats == 0
    assert "Throttling: Rate exceeded" in caplog.text


def test_run_with_heartbeats_repeats_at_the_interval() -> None:
    beats: list[float] = []
    code = run_with_heartbeats(
        [sys.executable, "-c", "import time; time.sleep(0.5)"],
        env=os.environ,
        timeout_s=10,
        heartbeat_after_s=0.1,
        heartbeat_interval_s=0.1,
        heartbeat=lambda: beats.append(time.monotonic()),
    )
    assert code == 0
    assert 2 <= len(beats) <= 5
    assert all(later - earlier >= 0.09 for earlier, later in itertools.pairwise(beats))


def test_a_hook_that_does_not_exist_is_reported(tmp_path: Path) -> None:
    code = run_with_heartbeats(
        [str(tmp_path / "missing-hook.sh")],
        env=os.environ,
        timeout_s=1,
        heartbeat_after_s=1,
        heartbeat_interval_s=1,
        heartbeat=lambda: None,
    )
    assert code == 127


def test_stop_event_ends_the_watch(imds: FakeImds) -> None:
    stop = threading.Event()
    watcher = watcher_for(imds, NeverCalled(), ["true"])
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(watcher.run(0.01, stop=stop)))
    thread.start()
    stop.set()
    thread.join(timeout=5)
    assert result == [0]


def test_empty_names_are_refused() -> None:
    code = lifecycle_watcher.main(["--hook-name", "", "--asg-name", ASG, "--region", "us-east-1"])
    assert code == 2


def test_default_hook_is_the_checkpoint_script_next_to_the_watcher() -> None:
    assert Path(lifecycle_watcher.DEFAULT_HOOK) == NODE_DIR / "checkpoint-hook.sh"


# ---------------------------------------------------------------------------------------------
# the command line, as the unit runs it: real checkpoint hook, moto-backed endpoint
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def job(tmp_path: Path) -> Iterator[TrainingJob]:
    """A job that checkpoints 0.4 s after SIGUSR1: long enough for a heartbeat at 0.1 s."""
    (tmp_path / "run" / "jobs").mkdir(parents=True)
    (tmp_path / "checkpoints").mkdir()
    with TrainingJob(tmp_path / "run" / "jobs", tmp_path / "checkpoints", delay=0.4) as started:
        yield started


def test_cli_terminated_checkpoints_with_heartbeats_then_completes_the_terminate_hook(
    job: TrainingJob, tmp_path: Path
) -> None:
    with mock_aws():
        fleet = LifecycleFleet()
        fleet.states[fleet.instance_id] = "InService"
        fleet.begin_termination()
        with FakeImds() as imds, FakeAws(fleet) as aws:
            imds.set("/latest/meta-data/instance-id", fleet.instance_id)
            imds.set(TARGET_STATE_PATH, "Terminated")
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TRAINING_", "CHECKPOINT_"))},
                **aws.client_env(),
                "TRAINING_PID_DIR": str(job.pid_file.parent),
                "CHECKPOINT_STATE_DIR": str(tmp_path / "run"),
                "CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
                "CHECKPOINT_TIMEOUT": "10",
                "CHECKPOINT_POLL": "0.05",
            }
            completed = subprocess.run(
                [
                    sys.executable,
                    str(NODE_DIR / "lifecycle_watcher.py"),
                    *("--imds-url", imds.url, "--interval", "0.01", "--max-polls", "20"),
                    *("--asg-name", fleet.asg_name, "--hook-name", fleet.terminate_hook, "--region", fleet.region),
                    *("--hook", shlex.join(["bash", str(NODE_DIR / "checkpoint-hook.sh")])),
                    *("--heartbeat-after", "0.1", "--heartbeat-interval", "10"),
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert job.checkpoint_files() == ["step-000001.pt"]
    params = {"LifecycleHookName": fleet.terminate_hook, "AutoScalingGroupName": fleet.asg_name}
    params["InstanceId"] = fleet.instance_id
    version = {"Version": "2011-01-01"}
    assert aws.calls == [
        {"Action": "RecordLifecycleActionHeartbeat", **version, **params},
        {"Action": "CompleteLifecycleAction", **version, **params, "LifecycleActionResult": "CONTINUE"},
    ]
    assert fleet.heartbeats == [(fleet.terminate_hook, fleet.instance_id)]
    assert fleet.state == "Terminated"
    assert "checkpoint hook succeeded" in completed.stdout
    assert "new checkpoint file" in completed.stderr  # checkpoint-hook.sh's own log
