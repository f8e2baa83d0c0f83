"""checkpoint-hook.sh against stand-in training jobs that follow the checkpoint contract."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.scripts.node.helpers import NODE_DIR
from tests.scripts.node.training_job import TrainingJob

HOOK = NODE_DIR / "checkpoint-hook.sh"


@dataclass(frozen=True)
class Node:
    """The node's paths of the contract, under a test folder: /run/gpu-platform and Lustre."""

    state_dir: Path
    pid_dir: Path
    checkpoint_dir: Path

    def env(self, **overrides: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINING_", "CHECKPOINT_", "NOTICE_"))}
        return {
            **base,
            "CHECKPOINT_STATE_DIR": str(self.state_dir),
            "TRAINING_PID_DIR": str(self.pid_dir),
            "CHECKPOINT_DIR": str(self.checkpoint_dir),
            "CHECKPOINT_TIMEOUT": "10",
            "CHECKPOINT_POLL": "0.05",
            **overrides,
        }

    def hook(self, kind: str = "interruption", **overrides: str) -> subprocess.CompletedProcess[str]:
        env = self.env(NOTICE_KIND=kind, NOTICE_ACTION="terminate", **overrides)
        return subprocess.run(["bash", str(HOOK)], env=env, capture_output=True, text=True, timeout=30)

    def job(self, name: str = "llama-pretrain", **kwargs: object) -> TrainingJob:
        return TrainingJob(self.pid_dir, self.checkpoint_dir, name, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    state_dir = tmp_path / "run" / "gpu-platform"
    (state_dir / "jobs").mkdir(parents=True)
    (tmp_path / "fsx" / "checkpoints").mkdir(parents=True)
    yield Node(state_dir, state_dir / "jobs", tmp_path / "fsx" / "checkpoints")


def test_signals_the_job_and_waits_for_its_new_checkpoint(node: Node) -> None:
    with node.job(delay=0.3) as job:
        result = node.hook()
        assert result.returncode == 0, result.stderr
        assert job.signals == 1
        assert job.checkpoint_files() == ["step-000001.pt"]
    assert f"job llama-pretrain: sent SIGUSR1 to pid {job.process.pid}" in result.stderr
    assert f"new checkpoint file: {job.checkpoints / 'step-000001.pt'}" in result.stderr
    assert (node.state_dir / "checkpoint.done").read_text().split()[1:] == ["interruption", "0"]


def test_a_rename_over_an_existing_checkpoint_counts_as_new(node: Node) -> None:
    with node.job(delay=0.2) as job:
        job.checkpoints.mkdir()
        (job.checkpoints / "step-000001.pt").write_bytes(b"an older one of the same name")
        result = node.hook()
    assert result.returncode == 0, result.stderr
    assert "new checkpoint file" in result.stderr


def test_a_checkpoint_still_being_written_is_not_a_checkpoint(node: Node) -> None:
    with node.job(mode="partial") as job:
        result = node.hook(CHECKPOINT_TIMEOUT="1")
        assert job.signals == 1
    assert result.returncode == 3
    assert "within 1 s for: llama-pretrain" in result.stderr


def test_every_job_is_signalled_and_each_must_write_its_own(node: Node) -> None:
    with node.job("pretrain") as writer, node.job("finetune", mode="ignore") as silent:
        result = node.hook(CHECKPOINT_TIMEOUT="1")
        assert (writer.signals, silent.signals) == (1, 1)
    assert result.returncode == 3
    assert "job pretrain: new checkpoint file" in result.stderr
    assert "within 1 s for: finetune" in result.stderr


def test_a_stale_pid_file_is_no_job(node: Node) -> None:
    (node.pid_dir / "gone.pid").write_text("999999999\n")
    result = node.hook()
    assert result.returncode == 2
    assert "job gone: " in result.stderr and "names no live process" in result.stderr
    assert "no training job found" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the pid file another owner")
def test_a_pid_file_naming_another_users_process_is_not_signalled(node: Node) -> None:
    with node.job() as job:
        os.chown(job.pid_file, 65534, 65534)  # nobody points at a root process
        result = node.hook()
        assert job.signals == 0
    assert result.returncode == 2
    assert "is not owned by the owner of" in result.stderr


def test_a_second_departure_notice_reuses_the_first_request(node: Node) -> None:
    with node.job() as job:
        first = node.hook("interruption", CHECKPOINT_REUSE_S="0")
        second = node.hook("termination", CHECKPOINT_REUSE_S="0")
        assert job.signals == 1
        assert job.checkpoint_files() == ["step-000001.pt"]
    assert (first.returncode, second.returncode) == (0, 0)
    assert "reusing the interruption request" in second.stderr
    assert "sent SIGUSR1" not in second.stderr


def test_a_departure_after_an_old_rebalance_checkpoints_again(node: Node) -> None:
    with node.job() as job:
        assert node.hook("rebalance", CHECKPOINT_REUSE_S="0").returncode == 0
        assert node.hook("interruption", CHECKPOINT_REUSE_S="0").returncode == 0
        assert job.signals == 2
        # The termination that follows the interruption reuses the interruption's request.
        result = node.hook("termination", CHECKPOINT_REUSE_S="0")
        assert job.signals == 2
    assert "reusing the interruption request" in result.stderr


def test_a_recent_rebalance_checkpoint_is_reused_by_the_departure(node: Node) -> None:
    with node.job() as job:
        assert node.hook("rebalance").returncode == 0
        result = node.hook("interruption", CHECKPOINT_REUSE_S="600")
        assert job.signals == 1
    assert result.returncode == 0
    assert "reusing the rebalance request" in result.stderr


def test_a_request_that_cannot_get_the_lock_does_not_signal(node: Node) -> None:
    with node.job() as job, open(node.state_dir / "checkpoint.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.monotonic()
        result = node.hook(CHECKPOINT_LOCK_WAIT="1")
        assert job.signals == 0
    assert result.returncode == 4
    assert "another checkpoint request still runs after 1 s" in result.stderr
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"CHECKPOINT_TIMEOUT": "1m"}, "CHECKPOINT_TIMEOUT must be whole seconds"),
        ({"CHECKPOINT_LOCK_WAIT": "soon"}, "CHECKPOINT_LOCK_WAIT must be whole seconds"),
        ({"CHECKPOINT_DIR": "/nonexistent/fsx/checkpoints"}, "is Lustre mounted?"),
        ({"CHECKPOINT_STATE_DIR": "/nonexistent/run/gpu-platform"}, "RuntimeDirectory= of the watcher unit"),
    ],
)
def test_bad_configuration_exits_1(node: Node, overrides: dict[str, str], message: str) -> None:
    result = node.hook(**overrides)
    assert result.returncode == 1
    assert message in result.stderr
