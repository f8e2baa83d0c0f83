"""The ``job`` sub-app of ``gpu-platform``: run, list, status, logs and cancel training jobs.

Exit codes: 0 done; 1 the job was refused or did not start, ``status`` found a node failed or unanswered,
``cancel`` left it running (or unanswered) on a node; 2 a usage, config, credentials or AWS problem. Every
problem is one line on stderr. ``run`` prints what it does on stderr and the job id alone on stdout, so
``JOB=$(gpu-platform job run ...)`` works.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from botocore.exceptions import BotoCoreError, ClientError

from config.loader import CONFIG_DIR

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


@contextmanager
def _one_line_errors(region: Callable[[], str]) -> Iterator[None]:
    """Turn a ``JobError`` or an AWS error into its line on stderr and the exit code."""
    from ops.job.context import JobError, aws_failure

    try:
        yield
    except JobError as err:
        print(err, file=sys.stderr)
        raise typer.Exit(err.code) from None
    except (BotoCoreError, ClientError) as err:
        print(aws_failure(err, region()), file=sys.stderr)
        raise typer.Exit(2) from None


def _open(env: str, config_dir: Path, job: str | None = None) -> Any:
    """The environment and its account; ``job`` (a job id argument) is checked first, before either."""
    from ops.job.context import open_context
    from ops.job.launch import check_job_id

    with _one_line_errors(lambda: "the config's region"):
        if job is not None:
            check_job_id(job, "JOB")
        return open_context(env, config_dir)


@app.command(
    context_settings={"allow_interspersed_args": False},
    epilog="Example: gpu-platform job run --env dev --fleet training --nodes 2 -- python3 train.py --epochs 3",
)
def run(
    env: EnvOption,
    fleet: Annotated[str, typer.Option("--fleet", "-f", help="a training fleet of the environment")],
    command: Annotated[list[str] | None, typer.Argument(help="the job's command, after --")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", "-n", min=1, help="nodes to use; all that qualify")] = None,
    name: Annotated[str | None, typer.Option("--name", help="the job id; <fleet>-<UTC time>-<hex> by default")] = None,
    workdir: Annotated[str | None, typer.Option("--workdir", help="below /fsx; /fsx/jobs/<job id> by default")] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="relaunch this job on healthy nodes")] = None,
    config_dir: ConfigDirOption = CONFIG_DIR,
) -> None:
    """Start a job (torchrun on every node) on InService, healthy nodes of a training fleet; print its id."""
    from ops.job.context import load_config, open_account
    from ops.job.launch import check_run_arguments, plan_new, plan_resume
    from ops.job.nodes import training_fleet_of
    from ops.job.render import print_plan, progress

    with _one_line_errors(lambda: "the config's region"):  # the arguments, then the config: no AWS call yet
        check_run_arguments(fleet, command, nodes=nodes, name=name, workdir=workdir, resume=resume)
        environment, shown = load_config(env, config_dir)
        training_fleet_of(environment, shown, fleet, nodes)
        context = open_account(environment, shown)
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
def list_jobs(env: EnvOption, json_out: JsonOption = False, config_dir: ConfigDirOption = CONFIG_DIR) -> None:
    """The environment's jobs, newest first: started at, nodes, launches, command."""
    from ops.job.history import launches
    from ops.job.render import jobs_table

    context = _open(env, config_dir)
    with _one_line_errors(lambda: context.environment.region):
        jobs = launches(context)
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


def _states(env: str, job: str, config_dir: Path, action: str, json_out: bool) -> None:
    from ops.job.history import latest_launch
    from ops.job.launch import RUNNING_STATES, job_states
    from ops.job.render import states_table

    context = _open(env, config_dir, job)
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
    job: JobArgument, env: EnvOption, json_out: JsonOption = False, config_dir: ConfigDirOption = CONFIG_DIR
) -> None:
    """Per node of the job's newest launch: state, result, exit code (exit 1 when a node failed)."""
    _states(env, job, config_dir, "status", json_out)


@app.command(epilog="Example: gpu-platform job cancel train-20250101-120000-ab12 --env dev")
def cancel(
    job: JobArgument, env: EnvOption, json_out: JsonOption = False, config_dir: ConfigDirOption = CONFIG_DIR
) -> None:
    """Stop the job on every node of its newest launch (SIGTERM to torchrun); prints the states after."""
    _states(env, job, config_dir, "stop", json_out)


@app.command(epilog="Example: gpu-platform job logs train-20250101-120000-ab12 --env dev --follow")
def logs(
    job: JobArgument,
    env: EnvOption,
    follow: Annotated[bool, typer.Option("--follow", "-F", help="keep printing until the job ends")] = False,
    config_dir: ConfigDirOption = CONFIG_DIR,
) -> None:
    """The job's output from every node, one "<time> <instance> <line>" each, from /gpu-platform/<env>/jobs."""
    from ops.job import logs as job_logs
    from ops.job.history import latest_launch
    from ops.job.launch import RUNNING_STATES, job_states

    context = _open(env, config_dir, job)
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
