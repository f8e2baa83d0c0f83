"""The fabric check's jobs, run the way ``gpu-platform job`` runs every job.

Nodes are ``ops.job.nodes.healthy_nodes`` of the fleet (InService and Healthy in the group, running, inside
the group's placement group), the job document ``gpu-platform-<env>-job`` runs through ``ops.job.remote``
(Action start, status, stop) and a job's output is its log streams ``<job>/<instance-id>`` in
``/gpu-platform/<env>/jobs``, read by name with ``ops.job.logs.read_streams``. What is the fabric check's
own: a benchmark never restarts (``MaxRestarts`` 0), the check waits for its jobs to end, and a job that
outlives its time, or that did not start on one of its nodes, is stopped on every node (``stop``), as
``gpu-platform job run`` stops a job that did not start everywhere: a torchrun waiting at the rendezvous for
a missing node would hold the others' GPUs for nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from config.fleets import Fleet
from ops.job.context import JobContext, JobError
from ops.job.logs import read_streams
from ops.job.nodes import Node, healthy_nodes, rendezvous_endpoint
from ops.job.remote import Invocation, run_everywhere, send

#: Seconds between two looks at the jobs (their status, an invocation that is not final yet).
POLL_S = 10.0
#: How long the nodes may take to answer Action=start.
START_TIMEOUT_S = 300.0
#: Job unit states (the runner's JSON ``state``) of a job that ended.
ENDED = ("inactive", "failed")


def fleet_nodes(context: JobContext, fleet: Fleet) -> list[Node]:
    """The fleet's nodes that may run a job, by instance id."""
    return healthy_nodes(context, fleet).nodes


class StartFailed(JobError):
    """A job that did not start on every node; ``started``: the nodes where it started or may still start."""

    def __init__(self, line: str, started: Sequence[Node]) -> None:
        super().__init__(line)
        self.started = list(started)


def _problem(node: Node, invocation: Invocation) -> str | None:
    """The one line for a node whose job document did not answer, or failed; None when it answered."""
    if not invocation.done:
        return f"{node.instance_id}: the job document did not answer in time; fix: check the SSM agent"
    if invocation.status != "Success" or invocation.report is None:
        return f"{node.instance_id}: the job document failed ({invocation.error}); fix: see its command output in SSM"
    return None


def _invocations(
    context: JobContext, job_id: str, nodes: Sequence[Node], parameters: Mapping[str, str], timeout_s: float
) -> dict[str, Invocation]:
    return run_everywhere(
        context,
        [n.instance_id for n in nodes],
        {"JobId": job_id, **parameters},
        job_id,
        poll_s=min(POLL_S, 2.0),
        timeout_s=max(timeout_s, 0.0),
    )


def _reports(
    context: JobContext, job_id: str, nodes: Sequence[Node], parameters: Mapping[str, str], timeout_s: float
) -> dict[str, dict[str, Any]]:
    """Run the job document on ``nodes``; each node's runner JSON line by instance id, or a ``JobError``."""
    invocations = _invocations(context, job_id, nodes, parameters, timeout_s)
    reports: dict[str, dict[str, Any]] = {}
    for node in nodes:
        invocation = invocations[node.instance_id]
        problem = _problem(node, invocation)
        if problem is not None:
            raise JobError(problem)
        reports[node.instance_id] = invocation.report or {}  # not None once _problem found none
    return reports


def start(context: JobContext, job_id: str, nodes: Sequence[Node], *, command: str, procs_per_node: int) -> None:
    """Start the job on every node; the rendezvous host is the node with the lowest instance id. Where a node
    does not start it, ``StartFailed`` names the nodes that did (or did not answer yet) for ``stop``."""
    parameters = {
        "Action": "start",
        "Nodes": str(len(nodes)),
        "ProcsPerNode": str(procs_per_node),
        "RendezvousEndpoint": rendezvous_endpoint(list(nodes), context.environment.jobs.rendezvous_port),
        "WorkingDirectory": "/fsx",
        "MaxRestarts": "0",  # a restarted benchmark would report a time that includes the restart
        "Command": command,
    }
    invocations = _invocations(context, job_id, nodes, parameters, START_TIMEOUT_S)
    problems = [(n, line) for n in nodes if (line := _problem(n, invocations[n.instance_id])) is not None]
    if problems:
        failed = {n.instance_id for n, _ in problems if invocations[n.instance_id].done}
        raise StartFailed(problems[0][1], [n for n in nodes if n.instance_id not in failed])


def wait(
    context: JobContext, jobs: Sequence[tuple[str, Sequence[Node]]], *, timeout_s: float
) -> dict[str, dict[str, Any]]:
    """Poll Action=status until every node of every job ended; the last JSON per ``job/instance``. A job
    still running after ``timeout_s`` is stopped (Action=stop) and the wait ends in a ``JobError``."""
    deadline = time.monotonic() + timeout_s
    while True:
        states: dict[str, dict[str, Any]] = {}
        for job_id, nodes in jobs:
            left = deadline + 60 - time.monotonic()
            for instance_id, report in _reports(context, job_id, nodes, {"Action": "status"}, left).items():
                states[f"{job_id}/{instance_id}"] = report
        if all(s.get("state") in ENDED for s in states.values()):
            return states
        if time.monotonic() > deadline:
            unsent = stop(context, jobs)
            stopped = f"could not stop {'; '.join(unsent)}" if unsent else "stopped"
            raise JobError(
                f"jobs {', '.join(j for j, _ in jobs)} still run after {timeout_s:g} s: {stopped}; "
                "fix: raise --timeout or check the job log"
            )
        time.sleep(POLL_S)


def stop(context: JobContext, jobs: Sequence[tuple[str, Sequence[Node]]]) -> list[str]:
    """Send Action=stop for each job to its nodes (the runner stops the job's unit); the jobs whose stop could
    not be sent, each with the reason, so that the caller's one line can say so."""
    unsent = []
    for job_id, nodes in jobs:
        if not nodes:
            continue
        try:
            send(context, [n.instance_id for n in nodes], {"Action": "stop", "JobId": job_id}, job_id)
        except (BotoCoreError, ClientError) as err:
            unsent.append(f"{job_id}: {err}")
    return unsent


def output(context: JobContext, job_id: str, nodes: Sequence[Node]) -> dict[str, str]:
    """Each node's job log stream (``<job>/<instance-id>``) as text, by instance id."""
    names = [context.names.job_log_stream(job_id, n.instance_id) for n in nodes]
    lines: dict[str, list[str]] = {n.instance_id: [] for n in nodes}
    for line in read_streams(context, names):
        lines[line.instance_id].append(line.message)
    return {node: "\n".join(text) for node, text in lines.items()}
