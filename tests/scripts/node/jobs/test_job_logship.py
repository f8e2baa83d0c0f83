"""The job log shipper (jobs/logship.py) against moto's CloudWatch Logs: PutLogEvents' limits per batch,
order, retries while CloudWatch cannot be reached, a bounded queue, a stream deleted meanwhile."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from moto import mock_aws

import tests.scripts.node.helpers  # noqa: F401 - puts scripts/node on sys.path

# isort: split
from jobs.logship import EVENT_OVERHEAD_BYTES, MAX_BATCH_BYTES, MAX_BATCH_EVENTS, MAX_EVENT_BYTES, LogShipper

GROUP, STREAM = "/gpu-platform/dev/jobs", "llama/i-0123456789abcdef0"


class Recording:
    """moto's logs client, recording each PutLogEvents batch; ``fail_next`` calls fail as if offline."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.batches: list[list[dict[str, Any]]] = []
        self.fail_next = 0

    def _maybe_fail(self) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise EndpointConnectionError(endpoint_url="https://logs.us-east-1.amazonaws.com")

    def create_log_stream(self, **kwargs: Any) -> Any:
        self._maybe_fail()
        return self.client.create_log_stream(**kwargs)

    def put_log_events(self, **kwargs: Any) -> Any:
        self._maybe_fail()
        assert "sequenceToken" not in kwargs
        answer = self.client.put_log_events(**kwargs)
        self.batches.append(kwargs["logEvents"])
        return answer


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recording]:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    with mock_aws():
        client = boto3.client("logs", region_name="us-east-1")
        client.create_log_group(logGroupName=GROUP)
        yield Recording(client)


def shipped(logs: Recording) -> list[str]:
    messages: list[str] = []
    token = None
    while True:
        kwargs = {"nextToken": token} if token else {}
        answer = logs.client.get_log_events(logGroupName=GROUP, logStreamName=STREAM, startFromHead=True, **kwargs)
        messages += [event["message"] for event in answer["events"]]
        if not answer["events"] or answer["nextForwardToken"] == token:
            return messages
        token = answer["nextForwardToken"]


def shipper(logs: Recording, notes: list[str], **kwargs: Any) -> LogShipper:
    return LogShipper(
        lambda: logs, GROUP, STREAM, flush_interval_s=0.05, max_backoff_s=0.2, note=notes.append, **kwargs
    )


def test_many_lines_go_in_batches_within_the_limits_and_in_order(logs: Recording) -> None:
    notes: list[str] = []
    ship = shipper(logs, notes)
    lines = [f"step {i} loss 0.{i:05d}" for i in range(MAX_BATCH_EVENTS * 2 + 500)]
    for line in lines:
        ship.put(line)
    big = "x" * (MAX_EVENT_BYTES + 5000)
    for _ in range(6):
        ship.put(big)
    ship.start()
    assert ship.close(timeout_s=60)
    assert len(logs.batches) >= 4
    for batch in logs.batches:
        assert len(batch) <= MAX_BATCH_EVENTS
        assert sum(len(e["message"].encode()) + EVENT_OVERHEAD_BYTES for e in batch) <= MAX_BATCH_BYTES
        assert [e["timestamp"] for e in batch] == sorted(e["timestamp"] for e in batch)
    got = shipped(logs)
    assert got[: len(lines)] == lines
    assert [len(m.encode()) <= MAX_EVENT_BYTES and m.endswith("[line cut]") for m in got[len(lines) :]] == [True] * 6
    assert notes == []


def test_lines_wait_while_cloudwatch_is_unreachable_and_arrive_in_order(logs: Recording) -> None:
    notes: list[str] = []
    ship = shipper(logs, notes)
    logs.fail_next = 4  # CreateLogStream, then PutLogEvents, fail until the fifth call
    ship.start()
    for i in range(50):
        ship.put(f"line {i}")
        time.sleep(0.005)
    assert ship.close(timeout_s=30)
    assert shipped(logs) == [f"line {i}" for i in range(50)]
    assert ship.failures == 4
    assert len([n for n in notes if n.startswith("cannot ship")]) == 1  # once per outage, not per retry
    assert notes[-1] == f"shipping to {GROUP}:{STREAM} works again"


def test_a_long_outage_drops_the_oldest_queued_lines_and_says_so(logs: Recording) -> None:
    notes: list[str] = []
    ship = shipper(logs, notes, max_queued=10)
    for i in range(25):
        ship.put(f"line {i}")
    ship.start()
    assert ship.close(timeout_s=30)
    assert shipped(logs) == [f"line {i}" for i in range(15, 25)]
    assert "15 lines of this job were not shipped" in " ".join(notes)


def test_a_stream_deleted_meanwhile_is_created_again(logs: Recording) -> None:
    notes: list[str] = []
    ship = shipper(logs, notes)
    ship.start()
    ship.put("before")
    deadline = time.monotonic() + 10
    while not logs.batches:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    logs.client.delete_log_stream(logGroupName=GROUP, logStreamName=STREAM)
    ship.put("after")
    assert ship.close(timeout_s=30)
    assert shipped(logs) == ["after"]


def test_lines_queued_while_a_batch_is_being_sent_are_not_lost_when_the_queue_overflows(logs: Recording) -> None:
    """The job writes while PutLogEvents is on the wire; the queue overflows and drops its oldest entries,
    the very ones being sent. The entries after them were never sent and must stay queued."""
    notes: list[str] = []
    ship = shipper(logs, notes, max_queued=10)
    for i in range(10):
        ship.put(f"a{i}")
    send = logs.put_log_events

    def put_during_send(**kwargs: Any) -> Any:
        if not logs.batches:  # the first batch (a0..a9) is on the wire: the job writes 5 more lines
            for i in range(5):
                ship.put(f"b{i}")
        return send(**kwargs)

    logs.put_log_events = put_during_send  # type: ignore[method-assign]
    ship.start()
    assert ship.close(timeout_s=30)
    assert shipped(logs) == [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(5)]
    assert [len(batch) for batch in logs.batches] == [10, 5]
    assert ship.sent == 15 and ship.dropped == 0
    assert notes == []  # the entries dropped from the queue had been sent: nothing was lost


def test_an_overflow_while_a_batch_fails_counts_what_was_really_lost(logs: Recording) -> None:
    notes: list[str] = []
    ship = shipper(logs, notes, max_queued=10)
    for i in range(10):
        ship.put(f"a{i}")
    send = logs.put_log_events

    def fail_with_overflow(**kwargs: Any) -> Any:
        if not logs.batches and logs.fail_next == 0 and not notes:
            for i in range(5):
                ship.put(f"b{i}")  # a0..a4 dropped while their batch is on the wire ...
            logs.fail_next = 1  # ... and that batch fails
        return send(**kwargs)

    logs.put_log_events = fail_with_overflow  # type: ignore[method-assign]
    ship.start()
    assert ship.close(timeout_s=30)
    assert shipped(logs) == [f"a{i}" for i in range(5, 10)] + [f"b{i}" for i in range(5)]
    assert "5 lines of this job were not shipped" in " ".join(notes)
