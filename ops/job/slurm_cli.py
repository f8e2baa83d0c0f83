"""The ``job`` commands' Slurm side (ops/job/slurm.py) and what they share: one line on stderr for a problem,
``--as-user`` checked against the config before the credentials are read."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from botocore.exceptions import BotoCoreError, ClientError


@contextmanager
def one_line_errors(region: Callable[[], str]) -> Iterator[None]:
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


def check_as_user(environment: Any, shown: str, as_user: str | None) -> None:
    from ops.job.context import JobError
    from ops.job.slurm_login import slurm_user

    if as_user is None:
        return
    if environment.slurm is None:
        raise JobError(f"--as-user: {shown} has no slurm section, and only Slurm jobs run as a user; fix: leave it out")
    slurm_user(environment, shown, as_user)


def check_ssm_run(environment: Any, as_user: str | None, fleet: str, name: str | None) -> None:
    """``job run`` on a fleet of the SSM path: no ``--as-user``, and no name a Slurm job id could have."""
    from ops.job.context import JobError

    if as_user is not None:
        raise JobError(f"--as-user: {fleet} is not a Slurm fleet, its jobs run as the job document; fix: leave it out")
    if environment.slurm is not None and name is not None and name.isdigit():
        raise JobError(
            f"--name: {name!r} is digits only, which in {environment.name} names a Slurm job; fix: add a letter"
        )


def submit(context: Any, fleet: Any, as_user: str | None, script: Any, **options: Any) -> str:
    """Submit to a Slurm fleet as the caller's user (ops/job/slurm.py); what it did on stderr, the job id back."""
    from ops.job import slurm
    from ops.job.slurm_login import caller_user

    with one_line_errors(lambda: context.environment.region):
        user = caller_user(context, as_user)
        print(f"submitting to Slurm partition {fleet.name} as {user.name} (account {user.team})", file=sys.stderr)
        job_id = slurm.submit(context, fleet, user, script, **options)
    print(f"submitted Slurm job {job_id}: gpu-platform job status {job_id} --env {context.environment.name}",
          file=sys.stderr)  # fmt: skip
    return job_id


def states(context: Any, job: str, as_user: str | None, action: str, json_out: bool) -> None:
    """``status`` or ``cancel`` of a Slurm job: one row, from accounting, with its GPU-hours."""
    from ops.job import slurm
    from ops.job.render import slurm_table
    from ops.job.slurm_login import caller_user

    with one_line_errors(lambda: context.environment.region):
        found = slurm.job_state(context, caller_user(context, as_user), job, action)
    if json_out:
        print(json.dumps({"job": job, "nodes": [slurm.report(found)]}, indent=2))
    else:
        slurm_table(slurm.report(found))
    raise typer.Exit(1 if slurm.failed(found, action) else 0)


def logs(context: Any, job: str, as_user: str | None, follow: bool) -> None:
    from ops.job import slurm
    from ops.job.slurm_login import caller_user

    with one_line_errors(lambda: context.environment.region):
        try:
            for line in slurm.output(context, caller_user(context, as_user), job, follow=follow):
                print(line, flush=True)
        except KeyboardInterrupt:
            raise typer.Exit(0) from None
