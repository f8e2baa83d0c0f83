"""The job document run on nodes through SSM Run Command, and the answers of the nodes.

``send`` calls SendCommand with the environment's job document (at most 50 instance ids a call, the API's
limit, so a larger job takes several commands with the same parameters); ``wait`` polls
GetCommandInvocation per node until each reaches a terminal status or the deadline passes. The job runner
on the node prints one JSON line (``{"job", "instance_id", "unit", "state", "result", "exit_code",
"started_at"}``); ``Invocation.report`` is that line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ops.job.context import JobContext
from ops.preflight.aws import error_code

#: SendCommand's limit of instance ids per call.
MAX_INSTANCES_PER_COMMAND = 50
#: SendCommand's limit on Comment.
MAX_COMMENT = 100
#: Invocation statuses after which nothing changes (GetCommandInvocation's Status).
TERMINAL = frozenset({"Success", "Cancelled", "TimedOut", "Failed"})
#: How long SSM may wait to deliver the command to a node before it gives up (SendCommand TimeoutSeconds).
DELIVERY_TIMEOUT_S = 120
#: The runner's answer's keys.
REPORT_KEYS = ("job", "instance_id", "unit", "state", "result", "exit_code", "started_at")


@dataclass(frozen=True)
class Invocation:
    """One node's run of the document: SSM's status, the script's exit code, its output."""

    instance_id: str
    command_id: str
    status: str
    response_code: int = -1
    stdout: str = ""
    stderr: str = ""

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def report(self) -> dict[str, Any] | None:
        """The runner's JSON line (the last line of its output that is one), None when it printed none."""
        for line in reversed(self.stdout.splitlines()):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and "state" in value and "job" in value:
                return {key: value.get(key) for key in REPORT_KEYS}
        return None

    @property
    def error(self) -> str:
        """What went wrong, in one line: the runner's last stderr line, else SSM's status."""
        if not self.done:
            return f"still {self.status} when the wait ended (is the node's SSM agent online?)"
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        detail = lines[-1] if lines else "no error output"
        return f"{self.status} (exit {self.response_code}): {detail}"


def comment_for(job_id: str) -> str:
    """``gpu-platform job <JobId>``, cut to SendCommand's 100 characters (the JobId parameter is whole)."""
    return f"gpu-platform job {job_id}"[:MAX_COMMENT]


def send(context: JobContext, instance_ids: list[str], parameters: Mapping[str, str], job_id: str) -> dict[str, str]:
    """Run the job document on ``instance_ids`` with ``parameters``; instance id -> command id."""
    ssm = context.aws.client("ssm")
    sent: dict[str, str] = {}
    for start in range(0, len(instance_ids), MAX_INSTANCES_PER_COMMAND):
        chunk = instance_ids[start : start + MAX_INSTANCES_PER_COMMAND]
        command = ssm.send_command(
            DocumentName=context.names.job_document,
            InstanceIds=chunk,
            Parameters={name: [value] for name, value in parameters.items()},
            Comment=comment_for(job_id),
            TimeoutSeconds=DELIVERY_TIMEOUT_S,
        )["Command"]
        sent.update(dict.fromkeys(chunk, command["CommandId"]))
    return sent


def _invocation(ssm: Any, instance_id: str, command_id: str) -> Invocation:
    try:
        answer = ssm.get_command_invocation(CommandId=command_id, InstanceId=instance_id)
    except ClientError as err:
        # Run Command is eventually consistent: right after SendCommand the invocation may not exist yet.
        if error_code(err) == "InvocationDoesNotExist":
            return Invocation(instance_id, command_id, "Pending")
        raise
    return Invocation(
        instance_id=instance_id,
        command_id=command_id,
        status=answer.get("Status", "Pending"),
        response_code=int(answer.get("ResponseCode", -1)),
        stdout=answer.get("StandardOutputContent", ""),
        stderr=answer.get("StandardErrorContent", ""),
    )


def wait(
    context: JobContext,
    sent: Mapping[str, str],
    *,
    on_change: Callable[[Invocation], None] | None = None,
    poll_s: float = 2.0,
    timeout_s: float = DELIVERY_TIMEOUT_S + 60,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Invocation]:
    """Poll each node's invocation until all are terminal or ``timeout_s`` has passed (a node still
    Pending or Delayed then keeps that status); ``on_change`` sees every status change."""
    ssm = context.aws.client("ssm")
    latest = {i: Invocation(i, c, "Pending") for i, c in sent.items()}
    deadline = clock() + timeout_s
    while True:
        for instance_id, command_id in sent.items():
            if latest[instance_id].done:
                continue
            now = _invocation(ssm, instance_id, command_id)
            if now.status != latest[instance_id].status and on_change is not None:
                on_change(now)
            latest[instance_id] = now
        if all(i.done for i in latest.values()) or clock() >= deadline:
            return latest
        (sleep or time.sleep)(poll_s)


def run_everywhere(
    context: JobContext,
    instance_ids: list[str],
    parameters: Mapping[str, str],
    job_id: str,
    **wait_options: Any,
) -> dict[str, Invocation]:
    """``send`` then ``wait``: each node's invocation once it has finished."""
    return wait(context, send(context, instance_ids, parameters, job_id), **wait_options)
