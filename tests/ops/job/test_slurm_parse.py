"""ops/job/slurm_parse.py on what the real Slurm of tests/flows/slurm printed (tests/ops/job/fixtures/slurm/, recorded
and kept current by tests/flows/slurm/test_job_commands.py), and on the AllocTRES of a GPU node."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ops.job.slurm_parse import (
    SACCT_FIELDS,
    SlurmOutputError,
    gpus_of,
    output_chunk,
    sacct_jobs,
    submitted_job_id,
)

FIXTURES = Path(__file__).with_name("fixtures") / "slurm"


def recorded(name: str) -> str:
    return str(json.loads((FIXTURES / f"{name}.json").read_text())["stdout"])


def test_sbatch_parsable_is_the_job_id_with_or_without_the_cluster() -> None:
    assert submitted_job_id(recorded("sbatch")) == "1"
    assert submitted_job_id("4242;gpu-test\n") == "4242"
    with pytest.raises(SlurmOutputError, match="not a job id"):
        submitted_job_id("sbatch: error: Batch job submission failed: Invalid account\n")


def test_sacct_of_a_finished_job_as_slurm_printed_it() -> None:
    (job,) = sacct_jobs(recorded("sacct_status"))
    assert (job.job_id, job.name, job.user, job.account, job.partition) == (
        "1",
        "gp-live",
        "root",
        "vision",
        "training",
    )
    assert (job.state, job.exit_code, job.nodes, job.node_list, job.gpus, job.gpu_hours) == (
        "COMPLETED", "0:0", 2, "a,b", 0, 0.0,
    )  # fmt: skip
    start = recorded("sacct_status").split("|")[SACCT_FIELDS.index("Start")]
    assert job.started_at == datetime.fromisoformat(start).replace(tzinfo=UTC)
    assert job.output_file == "<cluster>/jobs/gp-live/gp-live-1.out" and not job.active


def test_a_cancelled_job_reads_cancelled_whoever_cancelled_it() -> None:
    (job,) = sacct_jobs(recorded("scancel"))
    assert (job.state, job.account, job.active) == ("CANCELLED", "nlp", False)


def test_gpu_hours_are_the_allocated_gpus_times_the_elapsed_time() -> None:
    line = recorded("sacct_status").strip().split("|")
    line[SACCT_FIELDS.index("AllocTRES")] = "billing=192,cpu=192,gres/gpu=16,mem=2000G,node=2"
    line[SACCT_FIELDS.index("ElapsedRaw")] = "5400"
    (job,) = sacct_jobs("|".join(line))
    assert (job.gpus, job.gpu_hours) == (16, 24.0)
    assert gpus_of("cpu=8,gres/gpu:a100=4,gres/gpu:h100=4,node=1") == 8
    assert gpus_of("cpu=8,gres/gpu=8,gres/gpu:h100=8,node=1") == 8  # the plain count, not both
    assert gpus_of("") == 0


def test_a_pending_job_has_no_start_and_is_active() -> None:
    line = recorded("sacct_status").strip().split("|")
    for field, value in {
        "State": "PENDING",
        "Start": "Unknown",
        "NodeList": "None assigned",
        "ElapsedRaw": "0",
    }.items():
        line[SACCT_FIELDS.index(field)] = value
    (job,) = sacct_jobs("|".join(line) + "\n\n")
    assert (job.started_at, job.active, job.gpu_hours) == (None, True, 0.0)


def test_sacct_with_other_fields_than_asked_is_refused() -> None:
    with pytest.raises(SlurmOutputError, match="fields, not 15"):
        sacct_jobs("1|train|COMPLETED\n")


def test_the_log_readers_answer() -> None:
    chunk = output_chunk(recorded("read_output"))
    assert chunk is not None and chunk.size == 911 and chunk.text.endswith("job gp-live-1: done at step 20\n")
    assert output_chunk("missing\n") is None
    with pytest.raises(SlurmOutputError, match="not the file's size"):
        output_chunk("tail: cannot open\n")
