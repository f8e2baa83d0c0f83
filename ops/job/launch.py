"""``gpu-platform job run``: a new job, or ``--resume`` of an earlier one, started on the fleet's nodes.

A plan (job id, nodes, the document's parameters) is made first and checked against the patterns of the
job document, so a bad name or command fails here in one line rather than in SSM; then the document runs
with ``Action=start`` on every node. When a node's start fails, the nodes that did start are stopped
(``Action=stop``): a torchrun rendezvous that waits for a missing node would hold them for nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from config.catalog import get_instance_type
from ops import args as arg_checks
from ops.args import ArgumentError
from ops.job.context import JobContext, JobError
from ops.job.history import latest_launch
from ops.job.nodes import Selection, pick_nodes, procs_per_node, rendezvous_endpoint, running_instances
from ops.job.remote import Invocation, run_everywhere

#: Unit states in which a job still runs on a node.
RUNNING_STATES = frozenset({"active", "activating", "deactivating", "reloading"})


@dataclass(frozen=True)
class Plan:
    job_id: str
    selection: Selection
    parameters: dict[str, str]
    resumed: bool = False

    @property
    def instance_ids(self) -> list[str]:
        return [n.instance_id for n in self.selection.nodes]


def new_job_id(fleet: str, now: datetime | None = None, token: str | None = None) -> str:
    """``<fleet>-<UTC yyyymmdd-hhmmss>-<4 hex>``."""
    when = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{fleet}-{when:%Y%m%d-%H%M%S}-{token or secrets.token_hex(2)}"


def _checked(check: Callable[..., Any], *values: Any) -> Any:
    """``check`` of ``ops.args``; its ``ArgumentError`` as a ``JobError`` (exit 2)."""
    try:
        return check(*values)
    except ArgumentError as err:
        raise JobError(str(err)) from None


def check_job_id(job_id: str, option: str = "--name") -> str:
    return str(_checked(arg_checks.job_name, job_id, option))


def check_command(argv: list[str]) -> str:
    """The user's command as the one string the runner splits again (``shlex.join``)."""
    return str(_checked(arg_checks.job_command, argv))


def check_workdir(workdir: str) -> str:
    """The working directory normalised (``/fsx/a/../b`` is ``/fsx/b``), at or below /fsx."""
    return str(_checked(arg_checks.fsx_path, workdir))


def check_run_arguments(
    fleet: str,
    argv: list[str] | None,
    *,
    nodes: int | None = None,
    name: str | None = None,
    workdir: str | None = None,
    resume: str | None = None,
) -> None:
    """What ``job run`` can refuse from its arguments alone, before the config and the account are read."""
    if resume is not None:
        options = (("COMMAND", argv), ("--nodes", nodes), ("--name", name), ("--workdir", workdir))
        given = [flag for flag, value in options if value]
        if given:
            raise JobError(
                f"--resume reuses the job's command, node count, id and working directory; fix: leave out "
                f"{', '.join(given)}"
            )
        check_job_id(resume, "--resume")
        return
    job_id = check_job_id(name) if name is not None else new_job_id(fleet)
    check_command(argv or [])
    check_workdir(workdir or f"/fsx/jobs/{job_id}")


def plan_new(
    context: JobContext,
    fleet: str,
    argv: list[str],
    *,
    nodes: int | None = None,
    name: str | None = None,
    workdir: str | None = None,
) -> Plan:
    job_id = check_job_id(name or new_job_id(fleet))
    command = check_command(argv)
    directory = check_workdir(workdir or f"/fsx/jobs/{job_id}")
    selection = pick_nodes(context, fleet, nodes)
    parameters = {
        "Action": "start",
        "JobId": job_id,
        "Nodes": str(len(selection.nodes)),
        "ProcsPerNode": str(procs_per_node(selection.nodes)),
        "RendezvousEndpoint": rendezvous_endpoint(selection.nodes, context.environment.jobs.rendezvous_port),
        "WorkingDirectory": directory,
        "MaxRestarts": str(context.environment.jobs.max_restarts),
        "Command": command,
    }
    return Plan(job_id, selection, parameters)


def plan_resume(context: JobContext, fleet: str, job_id: str) -> Plan:
    """The job's newest launch again (JobId, Command, WorkingDirectory, ProcsPerNode, Nodes) on nodes that
    qualify now, with a new rendezvous; refused while a node of that launch still runs the job."""
    launch = latest_launch(context, job_id)
    still = [r for r in job_states(context, list(launch.instance_ids), job_id).values() if _running(r)]
    if still:
        ids = ", ".join(r["instance_id"] for r in still)
        raise JobError(
            f"job {job_id} still runs on {ids}; fix: gpu-platform job cancel {job_id} --env "
            f"{context.environment.name}, then resume it",
            code=1,
        )
    selection = pick_nodes(context, fleet, launch.nodes)
    procs = int(launch.parameters.get("ProcsPerNode", "1"))
    gpus = min(get_instance_type(n.instance_type).gpu_count for n in selection.nodes)
    if gpus < procs:
        raise JobError(
            f"job {job_id} ran {procs} processes per node, the nodes of {fleet} now have {gpus} GPUs; "
            "fix: resume it on a fleet of its instance type, or start a new job",
            code=1,
        )
    parameters = {
        **launch.parameters,
        "Action": "start",
        "RendezvousEndpoint": rendezvous_endpoint(selection.nodes, context.environment.jobs.rendezvous_port),
        "MaxRestarts": str(context.environment.jobs.max_restarts),
    }
    return Plan(job_id, selection, parameters, resumed=True)


def _running(report: dict[str, Any]) -> bool:
    return report.get("state") in RUNNING_STATES


def job_states(context: JobContext, instance_ids: list[str], job_id: str, action: str = "status") -> dict[str, Any]:
    """Instance id -> the runner's report after ``action`` (``status`` or ``stop``); a node that no longer
    runs (or whose SSM run failed) gets a report made here, with the reason in ``result``."""
    described = running_instances(context, instance_ids)
    alive = [i for i in instance_ids if described.get(i, {}).get("State", {}).get("Name") == "running"]
    reports: dict[str, Any] = {}
    for instance_id in instance_ids:
        if instance_id not in alive:
            gone = described.get(instance_id, {}).get("State", {}).get("Name", "gone")
            reports[instance_id] = _made_report(job_id, instance_id, "unknown", f"node {gone}")
    if alive:
        answers = run_everywhere(context, alive, {"Action": action, "JobId": job_id}, job_id)
        for instance_id, invocation in answers.items():
            reports[instance_id] = invocation.report or _made_report(job_id, instance_id, "unknown", invocation.error)
    return {i: reports[i] for i in instance_ids}


def _made_report(job_id: str, instance_id: str, state: str, result: str) -> dict[str, Any]:
    return {
        "job": job_id,
        "instance_id": instance_id,
        "unit": f"gpu-job-{job_id}.service",
        "state": state,
        "result": result,
        "exit_code": None,
        "started_at": None,
    }


def start(
    context: JobContext, plan: Plan, on_change: Callable[[Invocation], None] | None = None, **wait_options: Any
) -> dict[str, Invocation]:
    """Start the plan's job on its nodes; a node that fails stops the others and raises its error (exit 1)."""
    answers = run_everywhere(
        context, plan.instance_ids, plan.parameters, plan.job_id, on_change=on_change, **wait_options
    )
    failed = [i for i in answers.values() if i.done and i.status != "Success"]
    late = [i for i in answers.values() if not i.done]
    if failed or late:
        # Stop the job wherever it may have started: nodes that did, and nodes still waiting for delivery.
        reach = [i for i in plan.instance_ids if answers[i].status == "Success" or not answers[i].done]
        if reach:
            run_everywhere(context, reach, {"Action": "stop", "JobId": plan.job_id}, plan.job_id, **wait_options)
        first = (failed or late)[0]
        stopped = f"; stopped it on {', '.join(reach)}" if reach else ""
        raise JobError(
            f"job {plan.job_id} did not start on {first.instance_id}: {first.error}{stopped}; fix: remove the "
            f"cause, then gpu-platform job run --env {context.environment.name} --fleet {plan.selection.fleet.name} "
            f"--resume {plan.job_id}",
            code=1,
        )
    return answers
