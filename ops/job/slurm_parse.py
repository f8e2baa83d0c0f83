"""What Slurm's commands print, read: ``sbatch --parsable``, ``sacct --parsable2`` and the log reader's chunks.

``sacct`` is asked for ``SACCT_FIELDS`` with ``--parsable2 --noheader -X`` (one line per job allocation, fields
joined by ``|``, no trailing one). A job's GPUs are ``gres/gpu`` of its ``AllocTRES`` (``gres/gpu:<type>``
counts are added up when no plain count is there); its GPU-hours are those GPUs times ``ElapsedRaw`` (seconds)
over 3600: what Slurm's accounting charges the allocation, whether the GPUs were busy or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

#: The fields ``sacct --format`` is asked for, in this order.
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "User",
    "Account",
    "Partition",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "Elapsed",
    "ElapsedRaw",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "WorkDir",
)
#: States in which a job still holds, or waits for, nodes.
ACTIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED", "COMPLETING",
     "CONFIGURING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"}
)  # fmt: skip
#: States of a job that ended badly (``job status`` exits 1).
FAILED_STATES = frozenset({"FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"})


class SlurmOutputError(ValueError):
    """Slurm printed something this module cannot read."""


def submitted_job_id(stdout: str) -> str:
    """The job id of ``sbatch --parsable``'s answer: ``<id>`` or ``<id>;<cluster>`` on its last line."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    job_id = lines[-1].split(";")[0] if lines else ""
    if not job_id.isdigit():
        raise SlurmOutputError(f"sbatch printed {stdout.strip()!r}, not a job id")
    return job_id


def gpus_of(alloc_tres: str) -> int:
    """The GPUs of an ``AllocTRES`` such as ``billing=96,cpu=96,gres/gpu=8,mem=1000G,node=1``."""
    plain, typed = None, 0
    for part in alloc_tres.split(","):
        key, _, value = part.partition("=")
        if key == "gres/gpu":
            plain = int(value)
        elif key.startswith("gres/gpu:"):
            typed += int(value)
    return plain if plain is not None else typed


def _time(value: str) -> datetime | None:
    """sacct's ``2026-01-05T10:00:03`` (the cluster's time zone: UTC on the platform's nodes), None when unset."""
    if value in ("", "Unknown", "None", "N/A"):
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


@dataclass(frozen=True)
class SlurmJob:
    """One job allocation as ``sacct -X`` lists it."""

    job_id: str
    name: str
    user: str
    account: str
    partition: str
    state: str  # the first word: "CANCELLED by 20001" is CANCELLED
    exit_code: str  # "<code>:<signal>"
    submitted_at: datetime | None
    started_at: datetime | None
    elapsed: str
    elapsed_s: int
    nodes: int
    node_list: str
    gpus: int
    workdir: str

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.elapsed_s / 3600

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def output_file(self) -> str:
        """Where ``gpu-platform job run`` and examples/train_ddp.sbatch write the job's output: ``%x-%j.out``
        in its working directory."""
        return f"{self.workdir.rstrip('/')}/{self.name}-{self.job_id}.out"


def sacct_jobs(stdout: str) -> list[SlurmJob]:
    """The jobs of ``sacct --parsable2 --noheader -X --format=<SACCT_FIELDS>``, in sacct's order."""
    jobs = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        values = line.split("|")
        if len(values) != len(SACCT_FIELDS):
            raise SlurmOutputError(f"sacct printed {line!r}: {len(values)} fields, not {len(SACCT_FIELDS)}")
        row = dict(zip(SACCT_FIELDS, values, strict=True))
        jobs.append(
            SlurmJob(
                job_id=row["JobID"],
                name=row["JobName"],
                user=row["User"],
                account=row["Account"],
                partition=row["Partition"],
                state=row["State"].split(" ")[0],
                exit_code=row["ExitCode"],
                submitted_at=_time(row["Submit"]),
                started_at=_time(row["Start"]),
                elapsed=row["Elapsed"],
                elapsed_s=int(row["ElapsedRaw"] or 0),
                nodes=int(row["NNodes"] or 0),
                node_list=row["NodeList"],
                gpus=gpus_of(row["AllocTRES"]),
                workdir=row["WorkDir"],
            )
        )
    return jobs


@dataclass(frozen=True)
class Chunk:
    """A piece of a job's output file: the file's size in bytes and the text from the offset asked for."""

    size: int
    text: str


def output_chunk(stdout: str) -> Chunk | None:
    """The log reader's answer (``size <bytes>`` on the first line, then the file's text from the offset);
    None when it printed ``missing`` (no such file yet)."""
    first, _, text = stdout.partition("\n")
    if first.strip() == "missing":
        return None
    word, _, size = first.partition(" ")
    if word != "size" or not size.strip().isdigit():
        raise SlurmOutputError(f"the log reader printed {first!r}, not the file's size")
    return Chunk(int(size), text)
