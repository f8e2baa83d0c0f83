"""A stand-in training job that follows the checkpoint contract of scripts/node/README.md.

It runs as its own Python process: it writes its pid to ``<pid dir>/<job>.pid`` (write, then
rename), and on each SIGUSR1 records the signal at once and, ``delay`` seconds later, writes a checkpoint
under ``<checkpoint dir>/<job>/`` the way the contract asks (``.<name>`` first, then a rename to
``<name>``). Modes: ``write`` (as above), ``ignore`` (records the signal, writes nothing),
``partial`` (writes only the dot-file of a checkpoint in progress).

For the node's job runner (scripts/node/jobs): ``FAKE_TORCHRUN``, a torchrun that starts, restarts and
stops workers as torchrun does, and ``WORKER``, a training worker that checkpoints and resumes with the
example's own checkpoint code (examples/checkpointing.py).
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


# -- under the node's job runner ---------------------------------------------------------------------------

#: A stand-in for torchrun, installed as ``torchrun`` on the job's PATH: it reads torchrun's options, starts
#: ``--nproc-per-node`` workers with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, ...), restarts
#: them all up to ``--max-restarts`` times when one fails, and on SIGTERM stops them. Like the real one it
#: does NOT handle SIGUSR1 (the default action ends it). It appends its pid and argv to $FAKE_TORCHRUN_RECORD.
FAKE_TORCHRUN = r"""
import json, os, signal, subprocess, sys, time
argv = sys.argv[1:]
with open(os.environ["FAKE_TORCHRUN_RECORD"], "a") as out:
    out.write(json.dumps({"pid": os.getpid(), "argv": argv}) + "\n")
opts, rest = {}, list(argv)
flags = {"--no-python"}
while rest and rest[0].startswith("--"):
    key = rest.pop(0)
    opts[key] = True if key in flags else rest.pop(0)
    if key == "--module":
        break
nproc, restarts = int(opts["--nproc-per-node"]), int(opts["--max-restarts"])
if opts.get("--no-python"):
    command = rest
elif "--module" in opts:
    command = [sys.executable, "-u", "-m", opts["--module"], *rest]
else:
    command = [sys.executable, "-u", *rest]
workers, stopping = [], []
def stop(signum, frame):  # pass SIGTERM on; the loop below waits for the workers (never wait in a handler)
    stopping.append(signum)
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
signal.signal(signal.SIGTERM, stop)
for attempt in range(restarts + 1):
    workers.clear()
    for local_rank in range(nproc):
        env = dict(os.environ, RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(nproc),
                   LOCAL_WORLD_SIZE=str(nproc), TORCHELASTIC_RESTART_COUNT=str(attempt))
        workers.append(subprocess.Popen(command, env=env))
    codes = [w.wait() for w in workers]
    if stopping:
        print(f"fake-torchrun: stopped by signal {stopping[0]}, workers {codes}", flush=True)
        sys.exit(1)
    if all(code == 0 for code in codes):
        sys.exit(0)
    print(f"fake-torchrun: workers failed {codes} (attempt {attempt})", flush=True)
sys.exit(1)
"""

#: A training worker that follows the training contract with the example's own torch-free checkpoint code
#: (examples/checkpointing.py): it resumes from the newest complete checkpoint, "trains" one step every
#: STEP_S seconds, checkpoints every EVERY steps and at the end of the step after a SIGUSR1 (rank 0 writes),
#: stops after STEPS steps, and on SIGTERM checkpoints and exits 0. Its events go to $WORKER_RECORD.
WORKER = r"""
import json, os, pathlib, signal, sys, time
sys.path.insert(0, os.environ["EXAMPLES_DIR"])
import checkpointing as ckpt
steps, every, step_s = int(os.environ["STEPS"]), int(os.environ["EVERY"]), float(os.environ["STEP_S"])
rank = int(os.environ["RANK"])
record = os.environ["WORKER_RECORD"]
def note(**event):
    with open(record, "a") as out:
        out.write(json.dumps({"pid": os.getpid(), "rank": rank, **event}) + "\n")
job = ckpt.job_id()
directory = ckpt.job_checkpoint_dir(job)
requests = ckpt.CheckpointRequests(every)
stopping = []
signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
resumed = ckpt.load_newest(directory, lambda path: json.loads(path.read_text()))
step = resumed[1]["step"] if resumed else 0
note(event="start", step=step, restart=os.environ.get("TORCHELASTIC_RESTART_COUNT"),
     env={k: os.environ.get(k) for k in ("FI_PROVIDER", "PYTHONPATH", "GPU_PLATFORM_JOB_SUPERVISED", "CHECKPOINT_DIR")},
     cwd=os.getcwd())
def say(text):  # one write per line: the workers share torchrun's output
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
say(f"rank {rank}: job {job} starting at step {step}")
def save(step):
    if rank == 0:
        path = ckpt.write_atomically(directory, step, lambda p: p.write_text(json.dumps({"step": step})))
        note(event="checkpoint", step=step, path=path.name)
while step < steps and not stopping:
    time.sleep(step_s)
    step += 1
    if requests.due(step):
        save(step)
if stopping:
    save(step)
    note(event="stopped", step=step)
    sys.exit(0)
say(f"rank {rank}: done at step {step}")
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
"""


def install_fake_torchrun(bin_dir: Path) -> Path:
    """``torchrun`` (the stand-in above) in ``bin_dir``, run by this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "torchrun"
    path.write_text(f"#!{sys.executable}\n{FAKE_TORCHRUN}")
    path.chmod(0o755)
    return path


def write_worker(directory: Path) -> Path:
    """The worker script above as a file (``python3 <file>`` is what a user's command looks like)."""
    path = directory / "train_standin.py"
    path.write_text(WORKER)
    return path
