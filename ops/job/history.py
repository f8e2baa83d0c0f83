"""The jobs of an environment, from the job document's command history (ListCommands).

Every ``job run`` sends the document with ``Action=start``; that command's parameters are the job's
record: its JobId, Command, WorkingDirectory, ProcsPerNode, Nodes and rendezvous. A launch is the start
command (or, past 50 nodes, the start commands with the same parameters) that reached its ``Nodes``
instances; a job relaunched with ``--resume`` has several launches, the newest first. Systems Manager keeps
the command history for a limited time only: a job whose commands it has dropped is no longer listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ops.job.context import JobContext, JobError


@dataclass(frozen=True)
class Launch:
    job_id: str
    started_at: datetime
    instance_ids: tuple[str, ...]
    parameters: dict[str, str]
    status: str  # the (first) start command's status: Success, Failed, ...

    @property
    def nodes(self) -> int:
        return int(self.parameters.get("Nodes", "1"))

    @property
    def command(self) -> str:
        return self.parameters.get("Command", "")


def _parameters(command: dict[str, Any]) -> dict[str, str]:
    return {name: values[0] for name, values in command.get("Parameters", {}).items() if values}


def start_commands(context: JobContext) -> list[dict[str, Any]]:
    """The job document's ``Action=start`` commands, newest first."""
    document = context.names.job_document
    commands = context.aws.pages(
        "ssm", "list_commands", "Commands", Filters=[{"key": "DocumentName", "value": document}]
    )
    starts = [
        c
        for c in commands
        if c.get("DocumentName") == document
        and _parameters(c).get("Action", "start") == "start"
        and _parameters(c).get("JobId")
    ]
    return sorted(starts, key=lambda c: c["RequestedDateTime"], reverse=True)


def launches(context: JobContext) -> dict[str, list[Launch]]:
    """JobId -> its launches, newest first; jobs in the order of their newest launch."""
    jobs: dict[str, list[Launch]] = {}
    for command in start_commands(context):
        parameters = _parameters(command)
        job_id = parameters["JobId"]
        runs = jobs.setdefault(job_id, [])
        last = runs[-1] if runs else None
        if last is not None and last.parameters == parameters and len(last.instance_ids) < last.nodes:
            # Another part of the same launch (a job of more than 50 nodes takes several commands).
            runs[-1] = Launch(
                job_id,
                command["RequestedDateTime"],
                tuple(sorted({*last.instance_ids, *command.get("InstanceIds", [])})),
                parameters,
                last.status,
            )
            continue
        runs.append(
            Launch(
                job_id,
                command["RequestedDateTime"],
                tuple(sorted(command.get("InstanceIds", []))),
                parameters,
                command.get("Status", ""),
            )
        )
    return jobs


def latest_launch(context: JobContext, job_id: str) -> Launch:
    """The newest launch of ``job_id``; a ``JobError`` naming the way to list the jobs when there is none."""
    runs = launches(context).get(job_id)
    if not runs:
        raise JobError(
            f"no job {job_id!r} among the commands of {context.names.job_document} in {context.environment.region} "
            f"(Systems Manager keeps them for a limited time); fix: see the jobs with "
            f"gpu-platform job list --env {context.environment.name}"
        )
    return runs[0]
