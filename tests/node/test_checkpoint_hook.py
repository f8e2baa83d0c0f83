"""checkpoint-hook.sh against a stand-in training process that checkpoints on SIGUSR1."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node.helpers import NODE_DIR

HOOK = NODE_DIR / "checkpoint-hook.sh"

# Writes <checkpoint dir>/step-000100/model.pt on SIGUSR1 ("write") or ignores it ("ignore");
# touches <ready> once its handler is installed, so the test never signals it too early.
TRAINER = """
import pathlib, signal, sys, time
checkpoint_dir, ready, mode = sys.argv[1], sys.argv[2], sys.argv[3]
def on_usr1(signum, frame):
    if mode == "write":
        step = pathlib.Path(checkpoint_dir) / "step-000100"
        step.mkdir(parents=True, exist_ok=True)
        (step / "model.pt").write_bytes(b"weights")
signal.signal(signal.SIGUSR1, on_usr1)
pathlib.Path(ready).touch()
time.sleep(30)
"""


class Trainer:
    def __init__(self, tmp_path: Path, mode: str) -> None:
        self.tag = f"fake-trainer-{uuid.uuid4().hex}"
        self.checkpoint_dir = tmp_path / "checkpoints"
        self.checkpoint_dir.mkdir()
        (self.checkpoint_dir / "step-000050").mkdir()
        (self.checkpoint_dir / "step-000050" / "model.pt").write_bytes(b"older")
        ready = tmp_path / "ready"
        self.process = subprocess.Popen(
            [sys.executable, "-c", TRAINER, str(self.checkpoint_dir), str(ready), mode, self.tag]
        )
        self.pid_file = tmp_path / "training.pid"
        self.pid_file.write_text(f"{self.process.pid}\n")
        deadline = time.monotonic() + 5
        while not ready.exists():
            assert time.monotonic() < deadline, "the stand-in trainer did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=5)


@pytest.fixture
def writing_trainer(tmp_path: Path) -> Iterator[Trainer]:
    trainer = Trainer(tmp_path, "write")
    yield trainer
    trainer.stop()


@pytest.fixture
def silent_trainer(tmp_path: Path) -> Iterator[Trainer]:
    trainer = Trainer(tmp_path, "ignore")
    yield trainer
    trainer.stop()


def run_hook(**env: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith(("TRAINING_", "CHECKPOINT_"))}
    base.update({"CHECKPOINT_POLL": "0.05", "NOTICE_KIND": "interruption", "NOTICE_ACTION": "terminate"})
    return subprocess.run(["bash", str(HOOK)], env={**base, **env}, capture_output=True, text=True, timeout=20)


def test_signals_the_pid_file_process_and_waits_for_the_new_checkpoint(writing_trainer: Trainer) -> None:
    result = run_hook(
        TRAINING_PID_FILE=str(writing_trainer.pid_file),
        CHECKPOINT_DIR=str(writing_trainer.checkpoint_dir),
        CHECKPOINT_TIMEOUT="10",
    )
    assert result.returncode == 0, result.stderr
    assert f"sent SIGUSR1 to pid {writing_trainer.process.pid}" in result.stderr
    assert "new checkpoint file: " + str(writing_trainer.checkpoint_dir / "step-000100" / "model.pt") in result.stderr


def test_falls_back_to_pgrep_when_the_pid_file_is_stale(writing_trainer: Trainer, tmp_path: Path) -> None:
    stale = tmp_path / "stale.pid"
    stale.write_text("999999999\n")
    result = run_hook(
        TRAINING_PID_FILE=str(stale),
        TRAINING_PGREP_PATTERN=writing_trainer.tag,
        CHECKPOINT_DIR=str(writing_trainer.checkpoint_dir),
        CHECKPOINT_TIMEOUT="10",
    )
    assert result.returncode == 0, result.stderr
    assert "names no live process" in result.stderr
    assert f"sent SIGUSR1 to pid {writing_trainer.process.pid}" in result.stderr


def test_no_new_file_before_the_timeout_exits_3(silent_trainer: Trainer) -> None:
    started = time.monotonic()
    result = run_hook(
        TRAINING_PID_FILE=str(silent_trainer.pid_file),
        CHECKPOINT_DIR=str(silent_trainer.checkpoint_dir),
        CHECKPOINT_TIMEOUT="1",
    )
    assert result.returncode == 3, result.stderr
    assert "no new file under" in result.stderr
    assert time.monotonic() - started < 5


def test_no_training_process_exits_2(tmp_path: Path) -> None:
    result = run_hook(TRAINING_PGREP_PATTERN=f"no-such-process-{uuid.uuid4().hex}", CHECKPOINT_DIR=str(tmp_path))
    assert result.returncode == 2
    assert "no training process found" in result.stderr


def test_missing_checkpoint_dir_exits_1(tmp_path: Path) -> None:
    result = run_hook(CHECKPOINT_DIR=str(tmp_path / "not-mounted"))
    assert result.returncode == 1
    assert "is Lustre mounted?" in result.stderr


def test_bad_timeout_exits_1(tmp_path: Path) -> None:
    result = run_hook(CHECKPOINT_DIR=str(tmp_path), CHECKPOINT_TIMEOUT="1m")
    assert result.returncode == 1
    assert "whole seconds" in result.stderr
