"""Run a job on fleet nodes through the environment's job document (SSM Run Command) and read its output.

``JobRunner`` is the small interface the fabric check needs; ``SsmJobRunner`` implements it with its own
calls (Auto Scaling and EC2 describes, ``ssm:SendCommand`` of ``gpu-platform-<env>-job`` with Action
start/status, ``ssm:GetCommandInvocation``, ``logs:FilterLogEvents`` on ``/gpu-platform/<env>/jobs``), so
that the ``gpu-platform job`` commands' own node choice and send/wait can replace it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError

from config.naming import ResourceNames

#: SSM invocation statuses that are not final yet.
_PENDING = ("Pending", "InProgress", "Delayed")
#: Job unit states (the runner's JSON ``state``) of a job that ended.
ENDED = ("inactive", "failed")


class JobError(RuntimeError):
    """A job could not be started or followed: one line naming the node and the fix."""


@dataclass(frozen=True)
class Node:
    instance_id: str
    private_ip: str
    instance_type: str


class JobRunner(Protocol):
    def nodes(self, fleet: str) -> list[Node]: ...

    def start(self, job_id: str, nodes: Sequence[Node], *, command: str, procs_per_node: int) -> None: ...

    def wait(self, job_ids: Sequence[tuple[str, Sequence[Node]]], *, timeout_s: float) -> dict[str, dict[str, Any]]: ...

    def output(self, job_id: str, nodes: Sequence[Node]) -> dict[str, str]: ...


#: Seconds between two looks at the jobs (their status, an invocation that is not final yet).
POLL_S = 10.0


class SsmJobRunner:
    """``JobRunner`` over boto3; ``sleep`` and ``clock`` are injectable so tests do not wait."""

    def __init__(
        self,
        session: Any,
        names: ResourceNames,
        *,
        rendezvous_port: int,
        poll_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ssm = session.client("ssm")
        self._session = session
        self.names = names
        self.port = rendezvous_port
        self.poll_s = POLL_S if poll_s is None else poll_s
        self.sleep, self.clock = sleep, clock

    def nodes(self, fleet: str) -> list[Node]:
        """InService, Healthy instances of the fleet's group, by instance id."""
        group = self.names.asg_name(fleet)
        groups = self._session.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
        if not groups["AutoScalingGroups"]:
            raise JobError(f"Auto Scaling group {group} not found; fix: deploy the environment's Fleets stack")
        ids = sorted(
            i["InstanceId"]
            for i in groups["AutoScalingGroups"][0]["Instances"]
            if i["LifecycleState"] == "InService" and i["HealthStatus"] == "Healthy"
        )
        if not ids:
            return []
        found: dict[str, Node] = {}
        pages = self._session.client("ec2").get_paginator("describe_instances").paginate(InstanceIds=ids)
        for page in pages:
            for reservation in page["Reservations"]:
                for i in reservation["Instances"]:
                    found[i["InstanceId"]] = Node(i["InstanceId"], i["PrivateIpAddress"], i["InstanceType"])
        return [found[i] for i in ids if i in found]

    def _send(self, action: str, job_id: str, nodes: Sequence[Node], **extra: str) -> str:
        parameters = {"Action": [action], "JobId": [job_id], **{k: [v] for k, v in extra.items()}}
        response = self._ssm.send_command(
            DocumentName=self.names.job_document,
            InstanceIds=[n.instance_id for n in nodes],
            Parameters=parameters,
            Comment=f"gpu-platform job {job_id}",
        )
        return str(response["Command"]["CommandId"])

    def _invocation(self, command_id: str, node: Node, deadline: float) -> dict[str, Any]:
        """The runner's JSON line of one node, once its invocation is final."""
        while True:
            try:
                result = self._ssm.get_command_invocation(CommandId=command_id, InstanceId=node.instance_id)
            except ClientError as err:  # the invocation appears a moment after SendCommand
                if err.response.get("Error", {}).get("Code") != "InvocationDoesNotExist":
                    raise
                result = {"Status": "Pending"}
            if result["Status"] not in _PENDING:
                break
            if self.clock() > deadline:
                raise JobError(f"{node.instance_id}: the job document did not answer in time; fix: check the SSM agent")
            self.sleep(min(self.poll_s, 2.0))
        text = str(result.get("StandardOutputContent", "")).strip().splitlines()
        try:
            answer: dict[str, Any] = json.loads(text[-1]) if text else {}
        except json.JSONDecodeError:
            answer = {}
        if result["Status"] != "Success" or not answer:
            error = " ".join(str(result.get("StandardErrorContent", "")).split()) or result["Status"]
            raise JobError(f"{node.instance_id}: the job document failed ({error}); fix: see its command output in SSM")
        return answer

    def start(self, job_id: str, nodes: Sequence[Node], *, command: str, procs_per_node: int) -> None:
        """Start the job on every node; the rendezvous host is the node with the lowest instance id."""
        host = min(nodes, key=lambda n: n.instance_id)
        command_id = self._send(
            "start",
            job_id,
            nodes,
            Nodes=str(len(nodes)),
            ProcsPerNode=str(procs_per_node),
            RendezvousEndpoint=f"{host.private_ip}:{self.port}",
            WorkingDirectory="/fsx",
            MaxRestarts="0",  # a restarted benchmark would report a time that includes the restart
            Command=command,
        )
        deadline = self.clock() + 300
        for node in nodes:
            self._invocation(command_id, node, deadline)

    def wait(self, job_ids: Sequence[tuple[str, Sequence[Node]]], *, timeout_s: float) -> dict[str, dict[str, Any]]:
        """Poll Action=status until every node of every job ended; the last JSON per ``job/instance``."""
        deadline = self.clock() + timeout_s
        while True:
            states: dict[str, dict[str, Any]] = {}
            for job_id, nodes in job_ids:
                command_id = self._send("status", job_id, nodes)
                for node in nodes:
                    states[f"{job_id}/{node.instance_id}"] = self._invocation(command_id, node, deadline + 60)
            if all(s.get("state") in ENDED for s in states.values()):
                return states
            if self.clock() > deadline:
                for job_id, nodes in job_ids:
                    self._send("stop", job_id, nodes)
                raise JobError(
                    f"jobs {', '.join(j for j, _ in job_ids)} still run after {timeout_s:g} s: stopped; "
                    "fix: raise --timeout or check the job log"
                )
            self.sleep(self.poll_s)

    def output(self, job_id: str, nodes: Sequence[Node]) -> dict[str, str]:
        """Each node's job log stream (``<job>/<instance-id>``) as text, by instance id."""
        streams = {self.names.job_log_stream(job_id, n.instance_id): n.instance_id for n in nodes}
        lines: dict[str, list[str]] = {n.instance_id: [] for n in nodes}
        logs = self._session.client("logs")
        pages = logs.get_paginator("filter_log_events").paginate(
            logGroupName=self.names.job_log_group, logStreamNames=list(streams)
        )
        for page in pages:
            for event in page["events"]:
                lines[streams[event["logStreamName"]]].append(event["message"].rstrip("\n"))
        return {node: "\n".join(text) for node, text in lines.items()}
