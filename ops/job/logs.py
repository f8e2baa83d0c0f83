"""A job's output, read from its log streams in ``/gpu-platform/<env>/jobs``.

The job runner on each node writes the job's output to the stream ``<JobId>/<instance-id>``
(``ResourceNames.job_log_stream``). The job's streams are those named with the prefix ``<JobId>/`` (a JobId
holds no ``/``, so the prefix is the job's streams and only them, nodes of earlier launches included):
DescribeLogStreams lists them, FilterLogEvents reads them by name (at most 100 a call) and interleaves their
events. ``follow`` polls for new events until it is interrupted or no node runs the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from config.naming import ResourceNames
from ops.job.context import JobContext, JobError
from ops.preflight.aws import error_code


@dataclass(frozen=True)
class Line:
    timestamp_ms: int
    instance_id: str
    message: str
    event_id: str


def stream_prefix(job_id: str) -> str:
    return ResourceNames.job_log_stream(job_id, "")


#: FilterLogEvents' limit of stream names per call.
MAX_STREAMS_PER_CALL = 100

#: How far behind the newest event seen ``follow`` reads again: each node ships its own stream (every 2 s,
#: backing off while CloudWatch Logs refuses), so a node's events can arrive after newer events of another
#: node; those up to this much older are still printed, once each (by event id).
LATE_EVENTS_MS = 60_000


def streams(context: JobContext, job_id: str) -> list[str]:
    """The names of the job's log streams (one per node that has written)."""
    group = context.names.job_log_group
    try:
        found = context.aws.pages(
            "logs", "describe_log_streams", "logStreams", logGroupName=group, logStreamNamePrefix=stream_prefix(job_id)
        )
    except ClientError as err:
        if error_code(err) == "ResourceNotFoundException":
            raise JobError(
                f"log group {group} not found in {context.environment.region}; fix: deploy the environment's "
                f"{context.names.stack_name('Security')} stack (it creates the group)"
            ) from None
        raise
    return sorted(s["logStreamName"] for s in found)


def read(context: JobContext, job_id: str, start_ms: int | None = None) -> list[Line]:
    """Every event of the job's streams from ``start_ms`` on (all of them when None), oldest first."""
    return read_streams(context, streams(context, job_id), start_ms)


def read_streams(context: JobContext, names: list[str], start_ms: int | None = None) -> list[Line]:
    """Every event of the named streams of the job log group (``<JobId>/<instance-id>``), oldest first; a
    caller that knows the job's nodes names their streams and needs no DescribeLogStreams."""
    events: list[dict[str, Any]] = []
    for first in range(0, len(names), MAX_STREAMS_PER_CALL):
        options: dict[str, Any] = {
            "logGroupName": context.names.job_log_group,
            "logStreamNames": names[first : first + MAX_STREAMS_PER_CALL],
        }
        if start_ms is not None:
            options["startTime"] = start_ms
        events += context.aws.pages("logs", "filter_log_events", "events", **options)
    lines = [
        Line(e["timestamp"], e["logStreamName"].split("/", 1)[-1], e["message"].rstrip("\n"), e["eventId"])
        for e in events
    ]
    return sorted(lines, key=lambda line: line.timestamp_ms)


def follow(
    context: JobContext,
    job_id: str,
    still_running: Callable[[], bool],
    *,
    poll_s: float = 5.0,
    check_every: int = 6,
    sleep: Callable[[float], None] | None = None,
) -> Iterator[Line]:
    """Yield the job's lines as they arrive: all so far, then new ones every ``poll_s``; every
    ``check_every`` polls (and after the first read) ``still_running`` is asked; once it says no, one last
    read ends it. Each poll reads from ``LATE_EVENTS_MS`` before the newest event seen; an event older than
    that when it arrives is left to ``job logs`` without ``--follow``."""
    seen: dict[str, int] = {}  # event id -> timestamp, of the events still inside the window
    newest_ms: int | None = None
    polls = 0
    finished = False
    while True:
        start_ms = None if newest_ms is None else newest_ms - LATE_EVENTS_MS
        if start_ms is not None:  # what falls before the window is never read again
            seen = {event: ms for event, ms in seen.items() if ms >= start_ms}
        for line in read(context, job_id, start_ms):
            if line.event_id in seen:
                continue  # read again: the window overlaps the previous poll's
            seen[line.event_id] = line.timestamp_ms
            newest_ms = max(newest_ms or 0, line.timestamp_ms)
            yield line
        if finished:
            return
        if polls % check_every == 0 and not still_running():
            finished = True  # one more read picks up what the nodes wrote while they stopped
            continue
        polls += 1
        (sleep or time.sleep)(poll_s)
