"""The job runner the job document calls on each node of a job (``gpu-platform-<env>-job``):

    PYTHONPATH=/opt/gpu-platform/node python3 -m jobs.runner start|status|stop --job-id JOB [--nodes N]
        [--procs-per-node G] [--rdzv-endpoint HOST:PORT] [--workdir /fsx/...] [--max-restarts R]
        [--command 'COMMAND ...']

``start`` starts the transient unit ``gpu-job-<JOB>.service`` (so the job outlives the SSM command) and
returns at once; ``status`` and ``stop`` report on / stop it. Each prints one JSON line (the job, this
instance, the unit's state, result, exit code, start time). ``supervise`` is what the unit runs. Exit 0
done; 1 refused (the job is already active, systemd-run failed) with the JSON and a line on stderr; 2 bad
input (one line on stderr). scripts/node/README.md, "Training jobs", has the whole story.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from imds_client import INSTANCE_ID_PATH, ImdsClient, ImdsError

from jobs.logship import LogShipper
from jobs.settings import JOB_NAME, Settings
from jobs.state import ACTIVE_STATES, job_status, read_record, systemctl_show, update_record, write_record
from jobs.supervisor import (
    JobOutput,
    Supervisor,
    child_environment,
    cloudwatch_client_factory,
    now_iso,
)
from jobs.unit import job_unit, systemd_run_argv, torchrun_argv, unit_name
from jobs.workdir import ensure_workdir

# The job document's allowedPatterns: the runner checks the same, for a call that did not come through it.
PATTERNS = {
    "nodes": re.compile(r"^[1-9][0-9]{0,3}$"),
    "procs_per_node": re.compile(r"^[1-9][0-9]{0,2}$"),
    "rdzv_endpoint": re.compile(r"^[0-9.]{7,15}:[0-9]{2,5}$"),
    "workdir": re.compile(r"^/fsx(/[A-Za-z0-9._-]+)*$"),
    "max_restarts": re.compile(r"^[0-9]{1,3}$"),
}
MAX_COMMAND_CHARS = 4096


class BadInput(Exception):
    """Exit 2, one line on stderr."""


def read_env_file(path: str) -> dict[str, str]:
    """``KEY=value`` lines of node.env, read as data (never sourced); missing file: empty."""
    values = {}
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            values[key] = value
    return values


def pid_alive(pid_file: Path) -> bool:
    """Whether ``pid_file`` names a running process."""
    try:
        pid = int(pid_file.read_text().strip() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def instance_id(settings: Settings) -> str | None:
    try:
        return ImdsClient(settings.imds_url).get(INSTANCE_ID_PATH)
    except (ImdsError, OSError, ValueError):
        return None


def print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, sort_keys=False), flush=True)


def check_job(job: str) -> str:
    if not JOB_NAME.match(job):
        raise BadInput(f"--job-id {job!r}: a job name is [A-Za-z0-9_][A-Za-z0-9._-]* (up to 128 characters)")
    return job


def check_start(args: argparse.Namespace, settings: Settings) -> list[str]:
    """The start parameters, checked; returns the command as argv."""
    for name, pattern in PATTERNS.items():
        value = getattr(args, name)
        if not pattern.match(value):
            raise BadInput(f"--{name.replace('_', '-')} {value!r} does not match {pattern.pattern}")
    host, _, port = args.rdzv_endpoint.rpartition(":")
    if not 1 <= int(port) <= 65535 or any(not part.isdigit() or int(part) > 255 for part in host.split(".")):
        raise BadInput(f"--rdzv-endpoint {args.rdzv_endpoint!r} is not an IPv4 address and port")
    if "\n" in args.command or len(args.command) > MAX_COMMAND_CHARS:
        raise BadInput(f"--command must be one line of at most {MAX_COMMAND_CHARS} characters")
    try:
        command = shlex.split(args.command)
    except ValueError as err:
        raise BadInput(f"--command cannot be split into words ({err}); it is shlex.join(argv)") from err
    if not command:
        raise BadInput("--command is empty: `start` needs the command to run")
    workdir = settings.on_node(args.workdir)
    problem = ensure_workdir(workdir, settings.fsx_mount_point, settings.proc_mounts)
    if problem:
        raise BadInput(f"--workdir {args.workdir} is not a directory on this node ({workdir}) and {problem}")
    return command


def start(args: argparse.Namespace, settings: Settings) -> int:
    job = check_job(args.job_id)
    node_env = read_env_file(settings.node_env_file)
    env_name, region = node_env.get("GPU_PLATFORM_ENV", ""), node_env.get("AWS_REGION", "")
    if not env_name or not region:
        raise BadInput(f"{settings.node_env_file} has no GPU_PLATFORM_ENV or AWS_REGION (is this a platform node?)")
    # node.env's optional keys move the Lustre, pid and checkpoint folders (the runner's environment wins).
    settings = Settings.from_environ({**node_env, **os.environ})
    command = check_start(args, settings)
    problem = settings.check_unit_paths()
    if problem:
        raise BadInput(f"setting {problem}")
    workdir = settings.on_node(args.workdir)
    unit = unit_name(job)
    me = instance_id(settings)
    shown = systemctl_show(settings.systemctl, unit)
    if shown.get("ActiveState") in ACTIVE_STATES:
        return refuse(settings, job, me, f"job {job} is already {shown['ActiveState']} on this node ({unit})")
    pid_file = Path(settings.training_pid_dir) / f"{job}.pid"
    if pid_alive(pid_file):
        return refuse(settings, job, me, f"{pid_file} names a live process: a job of that name runs on this node")
    pid_file.unlink(missing_ok=True)  # left by a supervisor that was killed (SIGKILL after TimeoutStopSec)
    if shown.get("LoadState") == "loaded":  # ended (failed): a relaunch under the same name
        subprocess.run([settings.systemctl, "reset-failed", unit], capture_output=True, check=False, timeout=30)
    record = {
        "job": job,
        "argv": torchrun_argv(
            settings.torchrun,
            job=job,
            nodes=int(args.nodes),
            procs_per_node=int(args.procs_per_node),
            rdzv_endpoint=args.rdzv_endpoint,
            max_restarts=int(args.max_restarts),
            command=command,
        ),
        "command": command,
        "workdir": workdir,
        "env": env_name,
        "region": region,
        "instance_id": me,
        "settings": settings.as_dict(),
        "launched_at": now_iso(),
        "started_at": None,
        "exit_code": None,
    }
    write_record(settings.job_state_dir, job, record)
    argv = systemd_run_argv(job_unit(job, workdir, settings), settings.systemd_run)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        failed = done.returncode != 0
        why = (done.stderr or done.stdout).strip().replace("\n", " ")
    except (OSError, subprocess.TimeoutExpired) as err:
        failed, why = True, str(err)
    if failed:
        return refuse(settings, job, me, f"systemd-run could not start {unit}: {why}")
    print_json(job_status(settings.systemctl, settings.job_state_dir, job, me))
    return 0


def refuse(settings: Settings, job: str, me: str | None, reason: str) -> int:
    print_json({**job_status(settings.systemctl, settings.job_state_dir, job, me), "error": reason})
    print(f"jobs.runner: {reason}", file=sys.stderr)
    return 1


def status(args: argparse.Namespace, settings: Settings) -> int:
    job = check_job(args.job_id)
    print_json(job_status(settings.systemctl, settings.job_state_dir, job, instance_id(settings)))
    return 0


def stop(args: argparse.Namespace, settings: Settings) -> int:
    job = check_job(args.job_id)
    unit = unit_name(job)
    if systemctl_show(settings.systemctl, unit).get("ActiveState") in ACTIVE_STATES:
        # Blocks until the unit has stopped: torchrun and its workers got SIGTERM (SIGKILL after TimeoutStopSec).
        subprocess.run([settings.systemctl, "stop", unit], capture_output=True, check=False, timeout=300)
    print_json(job_status(settings.systemctl, settings.job_state_dir, job, instance_id(settings)))
    return 0


def supervise(args: argparse.Namespace) -> int:
    job = check_job(args.job_id)
    record = read_record(args.state_dir, job)
    if record is None:
        raise BadInput(f"no record of job {job} in {args.state_dir}: start it with `jobs.runner start`")
    settings = Settings(**record["settings"])
    stream = f"{job}/{record.get('instance_id') or instance_id(settings) or 'unknown-instance'}"
    group = f"/gpu-platform/{record['env']}/jobs"
    output = JobOutput(Path(settings.job_log_dir) / f"{job}.log", None)
    shipper = LogShipper(cloudwatch_client_factory(record["region"]), group, stream, note=output.note)
    output.shipper = shipper
    shipper.start()
    env = child_environment(dict(os.environ), settings.node_dir)
    env.update(
        {
            "GPU_PLATFORM_JOB_ID": job,
            "GPU_PLATFORM_JOB_SUPERVISED": "1",
            "TRAINING_PID_DIR": settings.training_pid_dir,
            "CHECKPOINT_DIR": settings.checkpoint_dir,
        }
    )
    supervisor = Supervisor(
        job,
        list(record["argv"]),
        workdir=record["workdir"],
        env=env,
        pid_file=Path(settings.training_pid_dir) / f"{job}.pid",
        output=output,
        on_started=lambda: update_record(args.state_dir, job, started_at=now_iso()),
    )
    try:
        status_code = supervisor.run()
    finally:
        output.close()
    update_record(args.state_dir, job, exit_code=status_code, ended_at=now_iso())
    return status_code


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jobs.runner", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("start", "status", "stop", "supervise"))
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--nodes", default="1")
    parser.add_argument("--procs-per-node", default="1")
    parser.add_argument("--rdzv-endpoint", default="127.0.0.1:29400")
    parser.add_argument("--workdir", default="/fsx")
    parser.add_argument("--max-restarts", default="3")
    parser.add_argument("--command", default="")
    parser.add_argument("--state-dir", default=Settings().job_state_dir, help="supervise: the job records' folder")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        if args.action == "supervise":
            return supervise(args)
        settings = Settings.from_environ()
        return {"start": start, "status": status, "stop": stop}[args.action](args, settings)
    except BadInput as err:
        print(f"jobs.runner: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
