"""One departure, one checkpoint: both watchers, as their units run them, against one node.

The real spot_watcher.py and lifecycle_watcher.py run as subprocesses with their units' ExecStart=
command lines and output files, the real checkpoint-hook.sh, a fake IMDSv2 and the moto-backed
Auto Scaling endpoint on 127.0.0.1, and a stand-in training job that follows the checkpoint
contract. The path under test: Spot notice / terminate hook -> lock -> SIGUSR1 -> the job writes
its checkpoint -> the terminate lifecycle hook is completed; and whichever watcher comes first,
the job is asked once.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from moto import mock_aws

from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from tests.scripts.node.fake_aws import FakeAws, LifecycleFleet
from tests.scripts.node.helpers import NODE_DIR, UNIT_DIR, FakeImds, read_unit, unit_output_file
from tests.scripts.node.training_job import TrainingJob

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import layout
from lifecycle_watcher import TARGET_STATE_PATH
from spot_watcher import INTERRUPTION, NOTICE_PATHS

SPOT_NOTICE = '{"action": "terminate", "time": "2026-11-20T09:14:00Z"}'
JOB_DELAY_S = 3.0  # the job takes this long to checkpoint: the second watcher arrives meanwhile


@dataclass
class Node:
    root: Path
    imds: FakeImds
    aws: FakeAws
    fleet: LifecycleFleet
    job: TrainingJob
    checkpoints_at_complete: list[list[str]]

    def path(self, on_node: str) -> Path:
        return self.root / on_node.lstrip("/")

    def node_env(self) -> dict[str, str]:
        """What the units read from node.env, rooted in the test folder."""
        return {
            "ASG_NAME": self.fleet.asg_name,
            "TERMINATE_HOOK_NAME": self.fleet.terminate_hook,
            "AWS_REGION": self.fleet.region,
            "TRAINING_PID_DIR": str(self.path("/run/gpu-platform/jobs")),
            "CHECKPOINT_DIR": str(self.path(layout.NODE_ENV_OPTIONAL["CHECKPOINT_DIR"])),
            "CHECKPOINT_STATE_DIR": str(self.path("/run/gpu-platform")),
            "CHECKPOINT_POLL": "0.05",
        }

    def start(self, unit_name: str, *extra: str) -> subprocess.Popen[bytes]:
        """The unit's ExecStart=, stdout and stderr appended to its StandardOutput= file."""
        unit = UNIT_DIR / unit_name
        env = self.node_env()
        (command,) = read_unit(unit)["Service"]["ExecStart"]
        argv = [re.sub(r"\$\{(\w+)\}", lambda m: env[m[1]], word) for word in shlex.split(command)]
        assert argv[0] == "/usr/bin/python3"
        argv = [sys.executable, argv[1].replace(layout.INSTALL_PREFIX, str(NODE_DIR)), *argv[2:]]
        argv = [word.replace(layout.INSTALL_PREFIX, str(NODE_DIR)) for word in argv]
        output = unit_output_file(unit)
        assert output, f"{unit_name} has no StandardOutput=append: file"
        log = self.path(output)
        log.parent.mkdir(parents=True, exist_ok=True)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TRAINING_", "CHECKPOINT_"))}
        with open(log, "ab") as out:
            return subprocess.Popen(
                [*argv, "--imds-url", self.imds.url, "--interval", "0.02", "--max-polls", "3000", *extra],
                env={**base, **env, **self.aws.client_env()},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def log(self, name: str) -> str:
        path = self.path(NODE_LOGS[name])
        return path.read_text() if path.exists() else ""

    def wait_for_log(self, name: str, text: str, timeout_s: float = 20) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.log(name):
            assert time.monotonic() < deadline, f"{name} never logged {text!r}:\n{self.log(name)}"
            time.sleep(0.02)

    def begin_termination(self) -> None:
        self.fleet.begin_termination()
        self.imds.set(TARGET_STATE_PATH, "Terminated")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    pid_dir = tmp_path / "run" / "gpu-platform" / "jobs"
    pid_dir.mkdir(parents=True)  # what the units' ExecStartPre= does
    checkpoints = tmp_path / layout.NODE_ENV_OPTIONAL["CHECKPOINT_DIR"].lstrip("/")
    checkpoints.mkdir(parents=True)  # on the node: Lustre, mounted by the bootstrap
    with mock_aws():
        fleet = LifecycleFleet()
        fleet.states[fleet.instance_id] = "InService"
        seen: list[list[str]] = []
        with FakeImds() as imds, FakeAws(fleet) as aws, TrainingJob(pid_dir, checkpoints, delay=JOB_DELAY_S) as job:
            imds.set("/latest/meta-data/instance-id", fleet.instance_id)
            complete = fleet.complete_lifecycle_action

            def complete_and_record(params: dict[str, str]) -> None:
                seen.append(job.checkpoint_files())  # what was on Lustre when the hook was completed
                complete(params)

            fleet.complete_lifecycle_action = complete_and_record  # type: ignore[method-assign]
            yield Node(tmp_path, imds, aws, fleet, job, seen)


def finish(*processes: subprocess.Popen[bytes]) -> list[int]:
    return [process.wait(timeout=60) for process in processes]


def assert_one_checkpoint_and_the_hook_completed(node: Node) -> None:
    assert node.job.signals == 1
    assert node.job.checkpoint_files() == ["step-000001.pt"]
    assert node.checkpoints_at_complete == [["step-000001.pt"]]
    assert node.fleet.state == "Terminated"
    completes = [call for call in node.aws.calls if call["Action"] == "CompleteLifecycleAction"]
    assert [(c["LifecycleHookName"], c["LifecycleActionResult"]) for c in completes] == [
        (node.fleet.terminate_hook, "CONTINUE")
    ]
    signalled = node.log("spot-watcher").count("sent SIGUSR1") + node.log("lifecycle-watcher").count("sent SIGUSR1")
    assert signalled == 1


@pytest.mark.slow
def test_spot_notice_then_terminate_hook_checkpoints_once_and_completes_the_hook(node: Node) -> None:
    node.imds.set(NOTICE_PATHS[INTERRUPTION], SPOT_NOTICE)
    spot = node.start("spot-watcher.service")
    node.wait_for_log("spot-watcher", "sent SIGUSR1")
    # The group reacts to the interruption: Terminating:Wait while the job is still writing.
    node.begin_termination()
    lifecycle = node.start("lifecycle-watcher.service", "--heartbeat-after", "0.5", "--heartbeat-interval", "0.5")

    assert finish(spot, lifecycle) == [0, 0]

    assert_one_checkpoint_and_the_hook_completed(node)
    assert "checkpoint hook for the interruption notice succeeded" in node.log("spot-watcher")
    lifecycle_log = node.log("lifecycle-watcher")
    assert "checkpoint-hook: reusing the interruption request" in lifecycle_log
    assert "checkpoint hook succeeded" in lifecycle_log
    assert f"completed {node.fleet.terminate_hook} with CONTINUE" in lifecycle_log
    # It waited on the lock while the job wrote, and kept the lifecycle action alive meanwhile.
    assert node.fleet.heartbeats, lifecycle_log


@pytest.mark.slow
def test_terminate_hook_then_spot_notice_checkpoints_once(node: Node) -> None:
    node.begin_termination()
    lifecycle = node.start("lifecycle-watcher.service")
    node.wait_for_log("lifecycle-watcher", "sent SIGUSR1")
    node.imds.set(NOTICE_PATHS[INTERRUPTION], SPOT_NOTICE)
    spot = node.start("spot-watcher.service")

    assert finish(spot, lifecycle) == [0, 0]

    assert_one_checkpoint_and_the_hook_completed(node)
    assert "checkpoint-hook: reusing the termination request" in node.log("spot-watcher")


@pytest.mark.slow
def test_both_watchers_at_once_ask_the_job_once(node: Node) -> None:
    node.imds.set(NOTICE_PATHS[INTERRUPTION], SPOT_NOTICE)
    node.begin_termination()
    spot = node.start("spot-watcher.service")
    lifecycle = node.start("lifecycle-watcher.service")

    assert finish(spot, lifecycle) == [0, 0]

    assert_one_checkpoint_and_the_hook_completed(node)
    logs = node.log("spot-watcher") + node.log("lifecycle-watcher")
    assert logs.count("checkpoint-hook: reusing the") == 1


@pytest.mark.slow
def test_the_watchers_write_only_the_files_the_agent_ships(node: Node) -> None:
    node.imds.set(NOTICE_PATHS[INTERRUPTION], SPOT_NOTICE)
    node.begin_termination()
    assert finish(node.start("spot-watcher.service"), node.start("lifecycle-watcher.service")) == [0, 0]

    written = {str(p.relative_to(node.root)) for p in node.path("/var/log").rglob("*") if p.is_file()}
    assert written == {NODE_LOGS[name].lstrip("/") for name in ("spot-watcher", "lifecycle-watcher")}
    assert "spot-watcher: WARNING Spot interruption notice: action=terminate" in node.log("spot-watcher")
    assert "lifecycle-watcher: WARNING the Auto Scaling group is terminating this node" in node.log("lifecycle-watcher")
