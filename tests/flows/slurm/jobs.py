"""The training example as the tests submit it: examples/train_ddp.sbatch on the test cluster, on the CPU."""

from __future__ import annotations

from pathlib import Path

from tests.flows.slurm.cluster import SlurmCluster
from tests.flows.slurm.config import ROOT_DIR

TEMPLATE = ROOT_DIR / "examples" / "train_ddp.sbatch"
#: Debian's torchrun with its one Python 3.11 fix (the file says why).
TORCHRUN = Path(__file__).with_name("torchrun_debian.py")
#: examples/train_ddp.py with its one fix for Debian's torch 1.13 (the file says why).
TRAIN = Path(__file__).with_name("train_debian.py")
SMALL = ("--batch-size", "32", "--synthetic-samples", "2048", "--features", "32")


def training_env(slurm: SlurmCluster) -> dict[str, str]:
    """What the submitter's shell holds (sbatch passes it on): the nodes' paths moved into the cluster's folder."""
    for folder in ("checkpoints", "jobs", "pids"):
        slurm.path(folder).mkdir(exist_ok=True)
    return {
        "CHECKPOINT_DIR": str(slurm.path("checkpoints")),
        "TRAINING_PID_DIR": str(slurm.path("pids")),
        "TORCHRUN": str(TORCHRUN),
        "TRAIN_SCRIPT": str(TRAIN),
        "RDZV_PORT": str(slurm.ports["rdzv"]),
        "NODE_ENV_FILE": str(slurm.path("no-node.env")),  # no GPU count: the CPU fallback, one process a node
        "OMP_NUM_THREADS": "1",
    }


def submit(slurm: SlurmCluster, *sbatch_args: str, train: tuple[str, ...] = ()) -> str:
    output = slurm.path("jobs", "%x-%j.out")
    return slurm.sbatch(f"--output={output}", *sbatch_args, str(TEMPLATE), *train, *SMALL, env=training_env(slurm))


def output(slurm: SlurmCluster, job: str, name: str = "train-ddp") -> str:
    path = slurm.path("jobs", f"{name}-{job}.out")
    return path.read_text() if path.exists() else ""


def checkpoints(slurm: SlurmCluster, job: str, name: str = "train-ddp") -> list[str]:
    folder = slurm.path("checkpoints", f"{name}-{job}")
    return sorted(path.name for path in folder.glob("step-*.pt")) if folder.is_dir() else []
