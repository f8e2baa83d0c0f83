"""A stand-in training job that follows the checkpoint contract of scripts/node/README.md.

It runs as its own Python process: it writes its pid to ``<pid dir>/<job>.pid`` (write, then
rename), and on each SIGUSR1 records the signal at once and, ``delay`` seconds later, writes a checkpoint
under ``<checkpoint dir>/<job>/`` the way the contract asks (``.<name>`` first, then a rename to
``<name>``). Modes: ``write`` (as above), ``ignore`` (records the signal, writes nothing),
``partial`` (writes only the dot-file of a checkpoint in progress).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

JOB = r"""
import os, pathlib, signal, sys, time
pid_dir, job, checkpoint_dir, delay, mode, record = sys.argv[1:7]
delay = float(delay)
asked = []
def on_usr1(signum, frame):
    asked.append(time.monotonic())
    with open(record, "a") as out:
        out.write(f"SIGUSR1 {len(asked)}\n")
signal.signal(signal.SIGUSR1, on_usr1)
pid_file = pathlib.Path(pid_dir) / f"{job}.pid"
(pid_file.parent / f".{job}.pid").write_text(f"{os.getpid()}\n")
os.rename(pid_file.parent / f".{job}.pid", pid_file)
served = 0
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    while served < len(asked) and time.monotonic() - asked[served] >= delay:
        served += 1
        if mode == "ignore":
            continue
        target = pathlib.Path(checkpoint_dir) / job
        target.mkdir(parents=True, exist_ok=True)
        partial = target / f".step-{served:06d}.pt"
        partial.write_bytes(b"weights")
        if mode == "write":
            os.rename(partial, target / f"step-{served:06d}.pt")
    time.sleep(0.01)
"""


class TrainingJob:
    """``with TrainingJob(...) as job:`` starts the process and waits for its pid file."""

    def __init__(
        self,
        pid_dir: Path,
        checkpoint_dir: Path,
        name: str = "llama-pretrain",
        *,
        delay: float = 0.0,
        mode: str = "write",
    ) -> None:
        self.name = name
        self.pid_file = pid_dir / f"{name}.pid"
        self.checkpoints = checkpoint_dir / name
        self.record = pid_dir.parent / f"{name}.signals"
        self.process = subprocess.Popen(
            [sys.executable, "-c", JOB, str(pid_dir), name, str(checkpoint_dir), str(delay), mode, str(self.record)]
        )

    def __enter__(self) -> TrainingJob:
        deadline = time.monotonic() + 10
        while not self.pid_file.exists():
            assert time.monotonic() < deadline, "the stand-in training job did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.wait(timeout=5)

    @property
    def signals(self) -> int:
        """How many SIGUSR1 the job has received so far."""
        return len(self.record.read_text().splitlines()) if self.record.exists() else 0

    def checkpoint_files(self) -> list[str]:
        """Finished checkpoints (no dot-files), by name."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(p.name for p in self.checkpoints.iterdir() if not p.name.startswith("."))
