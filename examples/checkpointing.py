"""The checkpoint side of the training contract, without torch: where a job's checkpoints live, how one is
written so that nobody ever reads half of it, which one a restart resumes from, and the "checkpoint now"
request the node's checkpoint hook sends (SIGUSR1).

``train_ddp.py`` uses it with ``torch.save`` / ``torch.load`` as the writer and reader; any other job can
use it the same way (it needs only the standard library). The rules (scripts/node/README.md, "Checkpoint
contract" and "Training jobs"):

- a job's checkpoints are ``$CHECKPOINT_DIR/<job>/step-<step>.pt`` (``/fsx/checkpoints/<job>/``, on Lustre);
  ``<job>`` is ``$GPU_PLATFORM_JOB_ID``, which the node's job runner sets;
- a checkpoint is written as ``.step-<step>.pt`` (a dot-file) and renamed to its name once complete: a
  reader, the checkpoint hook included, ignores dot-files, so a crash mid-write leaves nothing it would take;
- a restart resumes from the newest complete checkpoint; one that cannot be read is skipped for the next.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TypeVar

JOB_ID_ENV = "GPU_PLATFORM_JOB_ID"
"""Set by the node's job runner (scripts/node/jobs) for every process of a job it starts."""

SUPERVISED_ENV = "GPU_PLATFORM_JOB_SUPERVISED"
"""Set to 1 by the job runner: its supervisor owns the job's pid file, the job must not write one."""

CHECKPOINT_DIR_ENV = "CHECKPOINT_DIR"
DEFAULT_CHECKPOINT_DIR = "/fsx/checkpoints"
PID_DIR_ENV = "TRAINING_PID_DIR"
DEFAULT_PID_DIR = "/run/gpu-platform/jobs"

JOB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
CHECKPOINT_NAME = re.compile(r"^step-(\d{9})\.pt$")

T = TypeVar("T")


def step_name(step: int) -> str:
    """The file name of the checkpoint taken after ``step`` (zero-padded: names sort as steps do)."""
    if not 0 <= step < 10**9:
        raise ValueError(f"step {step} is outside 0..999999999")
    return f"step-{step:09d}.pt"


def job_id(environ: dict[str, str] | None = None, default: str | None = None) -> str:
    """The job's name from ``GPU_PLATFORM_JOB_ID`` (else ``default``), checked against the contract's pattern."""
    env = os.environ if environ is None else environ
    name = env.get(JOB_ID_ENV) or default
    if not name or not JOB_NAME.match(name):
        raise ValueError(
            f"{JOB_ID_ENV}={name!r}: a job name is [A-Za-z0-9_][A-Za-z0-9._-]* (up to 128 characters); "
            "run the job through `gpu-platform job run`, or set the variable"
        )
    return name


def job_checkpoint_dir(job: str, environ: dict[str, str] | None = None) -> Path:
    """``$CHECKPOINT_DIR/<job>`` (``/fsx/checkpoints/<job>``)."""
    env = os.environ if environ is None else environ
    return Path(env.get(CHECKPOINT_DIR_ENV) or DEFAULT_CHECKPOINT_DIR) / job


def complete_checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every complete checkpoint in ``directory``, oldest first. Dot-files (writes in
    progress, or left by a writer that died) and names that are not ``step-<9 digits>.pt`` are ignored."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = CHECKPOINT_NAME.match(path.name)
        if match and path.is_file():
            found.append((int(match[1]), path))
    return sorted(found)


def resume_candidates(directory: Path) -> Iterator[tuple[int, Path]]:
    """Complete checkpoints, newest first: a restart loads the first one it can read."""
    yield from reversed(complete_checkpoints(directory))


def load_newest(directory: Path, read: Callable[[Path], T]) -> tuple[int, T] | None:
    """``(step, state)`` of the newest complete checkpoint that ``read`` can load; ``None`` when there is none
    (a fresh start). A checkpoint ``read`` raises on (truncated by a dying node, say) is skipped."""
    for step, path in resume_candidates(directory):
        try:
            return step, read(path)
        except Exception as err:
            print(f"checkpoint {path} cannot be read ({err}); trying an older one", flush=True)
    return None


def write_atomically(directory: Path, step: int, write: Callable[[Path], None]) -> Path:
    """Write the checkpoint of ``step``: ``write`` fills ``.step-N.pt``, which is flushed to disk and then
    renamed to ``step-N.pt`` in the same directory (a rename is atomic on Lustre as on a local disk)."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / step_name(step)
    partial = directory / f".{final.name}"
    write(partial)
    with open(partial, "rb") as written:
        os.fsync(written.fileno())
    os.replace(partial, final)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return final


def prune(directory: Path, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest complete checkpoints; returns what was deleted."""
    if keep < 1:
        raise ValueError("keep at least one checkpoint")
    old = [path for _, path in complete_checkpoints(directory)[:-keep]]
    for path in old:
        path.unlink(missing_ok=True)
    return old


class CheckpointRequests:
    """SIGUSR1 means "checkpoint at the end of the current step". The handler only sets a flag (a handler
    must not write a checkpoint in the middle of a step); the training loop asks ``due(step)`` after each
    step. A second signal before the save is the same request."""

    def __init__(self, every: int, signum: int = signal.SIGUSR1) -> None:
        if every < 0:
            raise ValueError("--checkpoint-every must be 0 (signal only) or more")
        self.every = every
        self.requested = False
        signal.signal(signum, self._on_signal)

    def _on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested = True

    def due(self, step: int) -> bool:
        """True when ``step`` ends on the periodic schedule or after a request; clears the request."""
        periodic = self.every > 0 and step % self.every == 0
        asked, self.requested = self.requested, False
        return periodic or asked


class PidFile:
    """The pid file of the checkpoint contract, for a job started WITHOUT the node's job runner (under the
    runner its supervisor owns the file, and ``register`` does nothing). Write it once the SIGUSR1 handler
    is installed; ``remove`` at the end.

    The folder is the node's (spot-watcher.service makes it at boot). Where it is missing, on a machine that
    is not a platform node, no checkpoint hook would read the file: ``register`` says so in one line and
    does nothing; SIGUSR1 still asks for a checkpoint."""

    def __init__(self, job: str, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.supervised = env.get(SUPERVISED_ENV) == "1"
        self.path = Path(env.get(PID_DIR_ENV) or DEFAULT_PID_DIR) / f"{job}.pid"

    def register(self) -> bool:
        if self.supervised:
            return False
        if not self.path.parent.is_dir():
            print(
                f"checkpointing: {self.path.parent} is missing (not a platform node?): no pid file for the "
                f"checkpoint hook; SIGUSR1 still checkpoints (set {PID_DIR_ENV} to use another folder)",
                file=sys.stderr,
            )
            return False
        temporary = self.path.parent / f".{self.path.name}.{os.getpid()}"
        temporary.write_text(f"{os.getpid()}\n")
        os.replace(temporary, self.path)
        return True

    def remove(self) -> None:
        if not self.supervised:
            self.path.unlink(missing_ok=True)
