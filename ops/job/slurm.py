"""``gpu-platform job`` on a ``scheduler: slurm`` fleet: each command is one script on the environment's login
node (ops/job/slurm_login.py) that runs Slurm's own command as the caller's POSIX user.

- ``run``: ``sbatch --parsable`` of the template every node carries (examples/train_ddp.sbatch) in the fleet's
  partition, charged to the user's team (``--account``), its output ``%x-%j.out`` in the working directory;
  ``python3 SCRIPT ARGS`` becomes the template's ``TRAIN_SCRIPT`` and its arguments (torchrun runs it).
- ``list``: ``sacct --allusers`` of the last ``LIST_DAYS`` days (the jobs the user may see).
- ``status``: ``sacct -j``, with the job's GPU-hours (``AllocTRES`` gres/gpu x elapsed).
- ``cancel``: ``scancel``, then waits (up to ``CANCEL_WAIT_S``) until ``squeue`` no longer lists the job.
- ``logs``: the job's output file, read as the user in pieces that fit Run Command's output.

In an environment with a ``slurm:`` section, a JOB of digits only is a Slurm job id (what ``run`` prints for a
Slurm fleet); any other JOB is a job of the SSM path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from config.fleets import Fleet
from config.schema import Environment
from config.slurm import User
from ops.job.context import JobContext, JobError
from ops.job.history import Launch
from ops.job.launch import new_job_id
from ops.job.slurm_login import MAX_OUTPUT, as_user, login_node, run_script
from ops.job.slurm_parse import FAILED_STATES, SACCT_FIELDS, SlurmJob, output_chunk, sacct_jobs, submitted_job_id

#: The sbatch template on every node (the image installs examples/ under /opt/gpu-platform).
TEMPLATE = "/opt/gpu-platform/examples/train_ddp.sbatch"
#: How far back ``job list`` looks (sacct shows today's jobs only unless told a start time).
LIST_DAYS = 30
#: How long ``cancel`` waits for Slurm to end the job (its KillWait, 30 s by default, then the epilog).
CANCEL_WAIT_S = 90
#: Bytes of the output file read per Run Command (its output keeps 24,000 characters).
CHUNK_BYTES = MAX_OUTPUT * 2 // 3
SACCT = ("sacct", "--parsable2", "--noheader", "-X", f"--format={','.join(SACCT_FIELDS)}")


def is_slurm_job(environment: Environment, job: str) -> bool:
    return environment.slurm is not None and job.isdigit()


def _accounted(context: JobContext) -> None:
    """list, status, cancel and logs read Slurm's accounting (sacct): a cluster without it has none to read."""
    slurm = context.environment.slurm
    if slurm is not None and not slurm.accounting:
        raise JobError(
            f"{context.config_file}: slurm.accounting is false, and the job commands read Slurm's accounting "
            "(sacct); fix: set slurm.accounting: true and deploy, or use squeue and scancel on the login node"
        )


def training_script(argv: list[str]) -> tuple[str, list[str]]:
    """``python3 SCRIPT ARGS`` (or ``python``, or ``SCRIPT.py ARGS``): the template's TRAIN_SCRIPT and its
    arguments. Anything else is refused: the template starts a Python script under torchrun."""
    words = argv[1:] if argv and PurePosixPath(argv[0]).name in ("python", "python3") else argv
    if not words or not words[0].endswith(".py") or words[0].startswith("-") or "," in words[0]:
        raise JobError(
            f"COMMAND: {' '.join(argv)!r} is not 'python3 SCRIPT.py ARGS'; on a Slurm fleet the job is the sbatch "
            f"template {TEMPLATE} (torchrun runs the script on every node); fix: pass the training script and its "
            "arguments, or sbatch your own script on the login node"
        )
    return words[0], words[1:]


def check_slurm_run(argv: list[str] | None, resume: str | None) -> tuple[str, list[str]]:
    """What ``job run`` on a Slurm fleet refuses before the credentials are read."""
    if resume is not None:
        raise JobError(
            "--resume: on a Slurm fleet Slurm requeues the job itself (--requeue) and it resumes from its newest "
            "checkpoint; fix: see it with gpu-platform job status JOB, or submit a new job"
        )
    return training_script(argv or [])


def submit(
    context: JobContext,
    fleet: Fleet,
    user: User,
    command: tuple[str, list[str]],
    *,
    nodes: int | None,
    name: str | None,
    workdir: str | None,
) -> str:
    """Submit the job as ``user``; its Slurm job id."""
    script, arguments = command
    name = name or new_job_id(fleet.name)
    workdir = workdir or f"/fsx/jobs/{name}"
    sbatch = [
        "sbatch",
        "--parsable",
        f"--partition={fleet.name}",
        f"--account={user.team}",
        f"--nodes={nodes or 1}",
        f"--job-name={name}",
        f"--chdir={workdir}",
        f"--output={workdir}/%x-%j.out",
        f"--export=ALL,TRAIN_SCRIPT={script}",
        TEMPLATE,
        *arguments,
    ]
    node = login_node(context)
    out = run_script(context, node, [as_user(user, ["mkdir", "-p", workdir]), as_user(user, sbatch)], f"sbatch {name}")
    return submitted_job_id(out)


def _launch(job: SlurmJob) -> Launch:
    started = job.started_at or job.submitted_at or datetime.fromtimestamp(0, UTC)
    parameters = {
        "Nodes": str(job.nodes),
        "Command": job.name,
        "Partition": job.partition,
        "Account": job.account,
        "User": job.user,
        "GpuHours": f"{job.gpu_hours:.2f}",
    }
    nodes = () if job.node_list in ("", "None assigned") else (job.node_list,)
    return Launch(job.job_id, started, nodes, parameters, job.state)


def launches(context: JobContext, user: User) -> dict[str, list[Launch]]:
    """The jobs of the last ``LIST_DAYS`` days that ``user`` may see, newest first, as ``history.launches``."""
    _accounted(context)
    node = login_node(context)
    argv = [*SACCT, "--allusers", f"--starttime=now-{LIST_DAYS}days"]
    jobs = sorted(map(_launch, sacct_jobs(run_script(context, node, [as_user(user, argv)], "sacct"))),
                  key=lambda launch: launch.started_at, reverse=True)  # fmt: skip
    return {launch.job_id: [launch] for launch in jobs}


def _sacct_job(context: JobContext, node: str, user: User, job: str, lines: list[str], what: str) -> SlurmJob:
    found = sacct_jobs(run_script(context, node, [*lines, as_user(user, [*SACCT, "-j", job])], what))
    if not found:
        raise JobError(
            f"no Slurm job {job} that {user.name} may see in the accounting of {context.environment.name}; fix: see "
            f"the jobs with gpu-platform job list --env {context.environment.name}"
        )
    return found[0]


def report(job: SlurmJob) -> dict[str, Any]:
    """The job as ``job status --json`` shows a node of the SSM path, with Slurm's own fields beside."""
    code, _, signal = job.exit_code.partition(":")
    result = (
        "success" if job.state == "COMPLETED" else f"signal {signal}" if signal not in ("", "0") else job.state.lower()
    )
    return {
        "job": job.job_id,
        "name": job.name,
        "nodes": job.node_list,
        "state": job.state,
        "result": result,
        "exit_code": int(code) if code.isdigit() and not job.active else None,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "elapsed": job.elapsed,
        "gpus": job.gpus,
        "gpu_hours": round(job.gpu_hours, 2),
        "user": job.user,
        "account": job.account,
        "partition": job.partition,
    }


def job_state(context: JobContext, user: User, job: str, action: str = "status") -> SlurmJob:
    """The job from accounting; with ``action="stop"`` after ``scancel`` and the wait for it to end."""
    _accounted(context)
    node = login_node(context)
    lines: list[str] = []
    if action == "stop":
        queued = as_user(user, ["squeue", "--noheader", f"--jobs={job}", "--format=%T"])
        lines = [
            as_user(user, ["scancel", job]),
            f"for _ in $(seq {CANCEL_WAIT_S // 2}); do {queued} 2>/dev/null | grep -q . || break; sleep 2; done",
        ]
    return _sacct_job(context, node, user, job, lines, f"{'scancel' if action == 'stop' else 'sacct'} {job}")


def failed(job: SlurmJob, action: str) -> bool:
    """``status``: the job ended badly; ``cancel``: it still holds or waits for nodes."""
    return job.active if action == "stop" else job.state in FAILED_STATES


def _read(context: JobContext, node: str, user: User, path: str, offset: int) -> tuple[int, str] | None:
    """The file's size and up to ``CHUNK_BYTES`` of it from ``offset``; None when there is no such file yet."""
    quoted = as_user(user, ["tail", "-c", f"+{offset + 1}", path])
    line = (
        f"if {as_user(user, ['test', '-e', path])}; then echo size $({as_user(user, ['stat', '-c', '%s', path])}); "
        f"{quoted} | head -c {CHUNK_BYTES} || true; else echo missing; fi"
    )
    chunk = output_chunk(run_script(context, node, [line], f"read {PurePosixPath(path).name}"))
    return None if chunk is None else (chunk.size, chunk.text)


def output(
    context: JobContext, user: User, job_id: str, *, follow: bool = False, poll_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[str]:  # fmt: skip
    """The lines of the job's output file; with ``follow``, until the job has ended and all is read."""
    _accounted(context)
    node = login_node(context)
    job = _sacct_job(context, node, user, job_id, [], f"sacct {job_id}")
    offset, partial = 0, ""
    while True:
        read = _read(context, node, user, job.output_file, offset)
        size = offset if read is None else read[0]
        if read is not None and size > offset:
            offset += min(CHUNK_BYTES, size - offset)
            *lines, partial = (partial + read[1]).split("\n")
            yield from lines
            if offset < size:
                continue
        if not follow or not job.active:
            break
        sleep(poll_s)
        job = _sacct_job(context, node, user, job_id, [], f"sacct {job_id}")
    if partial:
        yield partial
