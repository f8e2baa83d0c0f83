"""The ``job`` sub-app of ``gpu-platform``: run, list, status, logs and cancel training jobs.

Exit codes: 0 done; 1 the job was refused or did not start, ``status`` found a node failed or unanswered,
``cancel`` left it running (or unanswered) on a node; 2 a usage, config, credentials or AWS problem. Every
problem is one line on stderr. ``run`` prints what it does on stderr and the job id alone on stdout, so
``JOB=$(gpu-platform job run ...)`` works.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from config.loader import CONFIG_DIR
from ops.job import slurm_cli
from ops.job.slurm_cli import one_line_errors as _one_line_errors

app = typer.Typer(
    name="job",
    help="Training jobs on a training fleet: run (or resume), list, status, logs, cancel (needs credentials).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EnvOption = Annotated[str, typer.Option("--env", "-e", help="environment: the name of a config/<env>.yaml")]
JobArgument = Annotated[str, typer.Argument(help="the job id that job run printed")]
JsonOption = Annotated[bool, typer.Option("--json", help="print one JSON document on stdout")]
ConfigDirOption = Annotated[Path, typer.Option("--config-dir", help="folder of the <env>.yaml files")]
AsUserOption = Annotated[
    str | None,
    typer.Option(
        "--as-user", help="Slurm: act as this user of slurm.users; by default the one your IAM identity names"
    ),
]


def _open(env: str, config_dir: Path, job: str | None = None, as_user: str | None = None) -> Any:
    """The environment and its account; ``job`` (a job id argument) is checked first, ``--as-user`` against the
    config next, before the credentials are read."""
    from ops.job.context import load_config, open_account
    from ops.job.launch import check_job_id

    with _one_line_errors(lambda: "the config's region"):
        if job is not None:
            check_job_id(job, "JOB")
        environment, shown = load_config(env, config_dir)
        slurm_cli.check_as_user(environment, shown, as_user)
        return open_account(environment, shown)


@app.command(
    context_settings={"allow_interspersed_args": False},
    epilog="Example: gpu-platform job run --env dev --fleet training --nodes 2 -- python3 train.py --epochs 3",
)
def run(
    env: EnvOption,
    fleet: Annotated[str, typer.Option("--fleet", "-f", help="a training fleet of the environment")],
    command: Annotated[list[str] | None, typer.Argument(help="the job's command, after --")] = None,
    nodes: Annotated[
        int | None, typer.Option("--nodes", "-n", min=1, help="nodes; all that qualify (Slurm: 1)")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="the job id; <fleet>-<UTC time>-<hex> by default")] = None,
    workdir: Annotated[str | None, typer.Option("--workdir", help="below /fsx; /fsx/jobs/<job id> by default")] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="relaunch this job on healthy nodes")] = None,
    as_user: AsUserOption = None,
    config_dir: ConfigDirOption = CONFIG_DIR,
) -> None:
    """Start a job (torchrun on every node) on InService, healthy nodes of a training fleet, or submit it to a
    Slurm fleet's queue (sbatch on the login node, as you); print its id."""
    from config.fleets import Scheduler
    from ops.job.context import load_config, open_account
    from ops.job.launch import check_run_arguments, plan_new, plan_resume
    from ops.job.nodes import training_fleet_of
    from ops.job.render import print_plan, progress
    from ops.job.slurm import check_slurm_run

    with _one_line_errors(lambda: "the config's region"):  # the arguments, then the config: no AWS call yet
        check_run_arguments(fleet, command, nodes=nodes, name=name, workdir=workdir, resume=resume)
        environment, shown = load_config(env, config_dir)
        chosen = training_fleet_of(environment, shown, fleet, nodes)
        slurm = chosen.scheduler is Scheduler.SLURM
        script = check_slurm_run(command, resume) if slurm else None
        if slurm:
            slurm_cli.check_as_user(environment, shown, as_user)
        else:
            slurm_cli.check_ssm_run(environment, as_user, fleet, name)
        context = open_account(environment, shown)
    if script is not None:
        print(slurm_cli.submit(context, chosen, as_user, script, nodes=nodes, name=name, workdir=workdir))
        return
    with _one_line_errors(lambda: context.environment.region):
        if resume is not None:
            plan = plan_resume(context, fleet, resume)
        else:
            plan = plan_new(context, fleet, command or [], nodes=nodes, name=name, workdir=workdir)
        print_plan(plan)
        from ops.job.launch import start

        with progress(plan) as on_change:
            start(context, plan, on_change)
    print(plan.job_id)


@app.command("list", epilog="Example: gpu-platform job list --env dev")
def list_jobs(
    env: EnvOption, json_out: JsonOption = False, as_user: AsUserOption = None, config_dir: ConfigDirOption = CONFIG_DIR
) -> None:
    """The environment's jobs, newest first: started at, nodes, launches, command (with Slurm: the jobs of the
    last 30 days in its accounting that you may see, the job name as command, the state as start)."""
    from ops.job import slurm
    from ops.job.history import launches
    from ops.job.render import jobs_table
    from ops.job.slurm_login import caller_user

    context = _open(env, config_dir, as_user=as_user)
    with _one_line_errors(lambda: context.environment.region):
        jobs = launches(context)
        if context.environment.slurm is not None:
            jobs.update(slurm.launches(context, caller_user(context, as_user)))
            jobs = dict(sorted(jobs.items(), key=lambda item: item[1][0].started_at, reverse=True))
    if json_out:
        print(json.dumps([_launch_json(runs) for runs in jobs.values()], indent=2))
    else:
        jobs_table(jobs)


def _launch_json(runs: list[Any]) -> dict[str, Any]:
    newest = runs[0]
    return {
        "job": newest.job_id,
        "started_at": newest.started_at.astimezone(UTC).isoformat(),
        "launches": len(runs),
        "instance_ids": list(newest.instance_ids),
        "parameters": newest.parameters,
        "status": newest.status,
    }


def _states(env: str, job: str, config_dir: Path, action: str, json_out: bool, as_user: str | None = None) -> None:
    from ops.job.history import latest_launch
    from ops.job.launch import RUNNING_STATES, job_states
    from ops.job.render import states_table
    from ops.job.slurm import is_slurm_job

    context = _open(env, config_dir, job, as_user)
    if is_slurm_job(context.environment, job):
        slurm_cli.states(context, job, as_user, action, json_out)
    with _one_line_errors(lambda: context.environment.region):
        launch = latest_launch(context, job)
        reports = job_states(context, list(launch.instance_ids), job, action)
    if json_out:
        print(json.dumps({"job": job, "nodes": list(reports.values())}, indent=2))
    else:
        states_table(job, reports)
    if action == "stop":  # the job may still run where a node answers active, or did not answer at all
        bad = [r for r in reports.values() if r["state"] in RUNNING_STATES or _unanswered(r)]
    else:
        bad = [r for r in reports.values() if r["state"] in ("failed", "unknown")]
    raise typer.Exit(1 if bad else 0)


def _unanswered(report: dict[str, Any]) -> bool:
    """A running node whose run of the document failed (a node that is gone reports ``node <EC2 state>``)."""
    return report["state"] == "unknown" and not str(report.get("result")).startswith("node ")


@app.command(epilog="Example: gpu-platform job status train-20250101-120000-ab12 --env dev")
def status(
    job: JobArgument,
    env: EnvOption,
    json_out: JsonOption = False,
    as_user: AsUserOption = None,
    config_dir: ConfigDirOption = CONFIG_DIR,
) -> None:
    """Per node of the job's newest launch: state, result, exit code (exit 1 when a node failed); a Slurm job
    (digits only): its row in accounting, with its GPU-hours."""
    _states(env, job, config_dir, "status", json_out, as_user)


@app.command(epilog="Example: gpu-platform job cancel train-20250101-120000-ab12 --env dev")
def cancel(
    job: JobArgument,
    env: EnvOption,
    json_out: JsonOption = False,
    as_user: AsUserOption = None,
    config_dir: ConfigDirOption = CONFIG_DIR,
) -> None:
    """Stop the job on every node of its newest launch (SIGTERM to torchrun), or scancel a Slurm job; prints the
    states after."""
    _states(env, job, config_dir, "stop", json_out, as_user)


@app.command(epilog="Example: gpu-platform job logs train-20250101-120000-ab12 --env dev --follow")
def logs(
    job: JobArgument,
    env: EnvOption,
    follow: Annotated[bool, typer.Option("--follow", "-F", help="keep printing until the job ends")] = False,
    as_user: AsUserOption = None,
    config_dir: ConfigDirOption = CONFIG_DIR,
) -> None:
    """The job's output from every node, one "<time> <instance> <line>" each, from /gpu-platform/<env>/jobs; a
    Slurm job's output file (<workdir>/<name>-<id>.out) line by line, as written."""
    from ops.job import logs as job_logs
    from ops.job.history import latest_launch
    from ops.job.launch import RUNNING_STATES, job_states
    from ops.job.slurm import is_slurm_job

    context = _open(env, config_dir, job, as_user)
    if is_slurm_job(context.environment, job):
        slurm_cli.logs(context, job, as_user, follow)
        return
    with _one_line_errors(lambda: context.environment.region):
        if not follow:
            lines: Any = job_logs.read(context, job)
            if not lines:
                print(f"job {job} has written no output yet ({context.names.job_log_group}: {job}/*)", file=sys.stderr)
        else:
            ids = list(latest_launch(context, job).instance_ids)
            lines = job_logs.follow(
                context,
                job,
                lambda: any(r["state"] in RUNNING_STATES for r in job_states(context, ids, job).values()),
            )
        try:
            for line in lines:
                when = datetime.fromtimestamp(line.timestamp_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                print(f"{when} {line.instance_id} {line.message}", flush=True)
        except KeyboardInterrupt:
            raise typer.Exit(0) from None
