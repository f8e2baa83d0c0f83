"""The transient systemd unit of a job, as data: one description that becomes both the ``systemd-run``
command line the runner executes and a unit file (which ``systemd-analyze verify`` can check).

The user's command never goes into the unit: the unit runs the runner's supervisor with the job's name, and
the supervisor reads what to run from the job's record. So nothing the user typed is ever interpreted by
systemd (``$`` expansion, ``%`` specifiers, quoting), and the unit holds only checked names and paths.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from jobs.settings import Settings

UNIT_PREFIX = "gpu-job-"

TIMEOUT_STOP_S = 90
"""SIGTERM goes to the supervisor, which hands it to torchrun; torchrun sends it to its workers and waits up
to 30 s before SIGKILL. 90 s leaves a job's own SIGTERM handler time to finish a checkpoint."""

PYTHON = re.compile(r"^python(3(\.\d+)?)?$")


def unit_name(job: str) -> str:
    return f"{UNIT_PREFIX}{job}.service"


@dataclass(frozen=True)
class JobUnit:
    name: str
    description: str
    unit: tuple[tuple[str, str], ...]
    """[Unit] settings (ordering)."""
    service: tuple[tuple[str, str], ...]
    """[Service] settings, in the order systemd-run gets them as ``--property``."""
    exec_start: tuple[str, ...]


def job_unit(job: str, workdir: str, settings: Settings) -> JobUnit:
    """The unit of job ``job`` (a checked name), working in ``workdir`` (a checked path under /fsx)."""
    environment = {
        "PATH": settings.job_path,
        "PYTHONPATH": settings.node_dir,
        "PYTHONUNBUFFERED": "1",
        "GPU_PLATFORM_JOB_ID": job,
        "GPU_PLATFORM_JOB_SUPERVISED": "1",
    }
    service = [
        # exec: systemd-run fails when the supervisor cannot be started at all (not only later).
        ("Type", "exec"),
        ("WorkingDirectory", workdir),
        *(("Environment", f"{key}={value}") for key, value in environment.items()),
        # The node's settings and its NCCL/EFA environment (FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA, NCCL_DEBUG),
        # which the bootstrap writes on EFA fleets only: optional ("-").
        ("EnvironmentFile", f"-{settings.node_env_file}"),
        ("EnvironmentFile", f"-{settings.efa_node_env_file}"),
        # SIGTERM to the supervisor alone (it stops torchrun, torchrun its workers); SIGKILL to whatever is
        # left of the unit after TimeoutStopSec.
        ("KillMode", "mixed"),
        ("TimeoutStopSec", str(TIMEOUT_STOP_S)),
        # torchrun restarts the workers (--max-restarts); a restart of the whole unit would rejoin the
        # rendezvous alone. A relaunch is `gpu-platform job run --resume`.
        ("Restart", "no"),
        # EFA and NCCL register (pin) GPU and host buffers: a service gets systemd's small default memlock
        # limit, not the limits.conf of a login shell.
        ("LimitMEMLOCK", "infinity"),
        ("LimitNOFILE", "1048576"),
    ]
    exec_start = (
        settings.python,
        "-m",
        "jobs.runner",
        "supervise",
        "--job-id",
        job,
        "--state-dir",
        settings.job_state_dir,
    )
    return JobUnit(
        name=unit_name(job),
        description=f"GPU platform training job {job}",
        unit=(("After", "lustre-mount.service network-online.target"),),
        service=tuple(service),
        exec_start=exec_start,
    )


def systemd_run_argv(unit: JobUnit, systemd_run: str = "systemd-run") -> list[str]:
    """The command that creates and starts the unit; it returns once the supervisor has been started."""
    argv = [systemd_run, "--unit", unit.name, "--description", unit.description]
    for key, value in (*unit.unit, *unit.service):
        argv += ["--property", f"{key}={value}"]
    return [*argv, "--", *unit.exec_start]


def unit_file(unit: JobUnit) -> str:
    """The same unit as a file (for ``systemd-analyze verify`` and for reading)."""
    lines = ["[Unit]", f"Description={unit.description}"]
    lines += [f"{key}={value}" for key, value in unit.unit]
    lines += ["", "[Service]"]
    lines += [f"{key}={value}" for key, value in unit.service]
    lines.append(f"ExecStart={shlex.join(unit.exec_start)}")
    return "\n".join(lines) + "\n"


def torchrun_argv(
    torchrun: str,
    *,
    job: str,
    nodes: int,
    procs_per_node: int,
    rdzv_endpoint: str,
    max_restarts: int,
    command: list[str],
) -> list[str]:
    """torchrun's command line for the user's command.

    torchrun starts a Python script with its own interpreter (the venv's), or any executable with
    ``--no-python``. So ``python3 script.py ARGS`` becomes ``torchrun ... script.py ARGS``, ``python3 -m
    pkg.mod ARGS`` becomes ``torchrun ... --module pkg.mod ARGS``, and anything else (a shell script, a
    binary, ``python3`` with interpreter options) runs as is under ``--no-python``, found on the job's PATH.
    """
    if not command:
        raise ValueError("the command is empty")
    argv = [
        torchrun,
        "--nnodes",
        str(nodes),
        "--nproc-per-node",
        str(procs_per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        rdzv_endpoint,
        "--rdzv-id",
        job,
        "--max-restarts",
        str(max_restarts),
    ]
    program, *rest = command
    if PYTHON.match(program.rsplit("/", 1)[-1]) and rest:
        if rest[0] == "-m" and len(rest) >= 2:
            return [*argv, "--module", rest[1], *rest[2:]]
        if not rest[0].startswith("-"):
            return [*argv, *rest]
    return [*argv, "--no-python", *command]
