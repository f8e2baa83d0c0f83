"""Ship a job's output lines to a CloudWatch Logs stream, without ever holding the job up.

The supervisor writes every line to the job's local file first (always), then hands it to ``put``, which
only appends to an in-memory queue. A thread sends the queue in batches with PutLogEvents (no sequence
token: CloudWatch Logs ignores it and accepts parallel calls on one stream), within PutLogEvents' limits:
at most 10,000 events and 1,048,576 bytes per batch (each event's UTF-8 message plus 26 bytes), events in
chronological order, one batch within 24 hours; an event over 256 KB is cut. A failed call is retried with
a growing pause (up to ``max_backoff_s``), the batch kept; CloudWatch unreachable for long only makes the
queue grow up to ``max_queued`` events, beyond which the oldest are dropped from the queue (they are in the
local file) and the count is reported once the stream is reachable again. Each queued event carries a
sequence number: the job may write (and the queue drop its oldest entries) while a batch is on the wire, so
a sent batch removes the entries up to its last number, never a count of entries.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

MAX_BATCH_EVENTS = 10_000
MAX_BATCH_BYTES = 1_048_576
EVENT_OVERHEAD_BYTES = 26
MAX_EVENT_BYTES = 256 * 1024 - EVENT_OVERHEAD_BYTES
MAX_BATCH_SPAN_MS = 24 * 3600 * 1000 - 60_000


def _error_code(err: Exception) -> str:
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Code", type(err).__name__))


def cut(message: str) -> str:
    """``message`` shortened to what one log event may hold (UTF-8 bytes), on a character boundary."""
    data = message.encode()
    if len(data) <= MAX_EVENT_BYTES:
        return message
    return data[: MAX_EVENT_BYTES - 16].decode(errors="ignore") + " [line cut]"


class LogShipper:
    """``put(line)`` from any thread; ``start()`` once; ``close(timeout_s)`` at the end (a last flush)."""

    def __init__(
        self,
        client_factory: Callable[[], Any],
        group: str,
        stream: str,
        *,
        flush_interval_s: float = 2.0,
        max_backoff_s: float = 30.0,
        max_queued: int = 200_000,
        note: Callable[[str], None] = lambda _line: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client_factory = client_factory
        self._client: Any = None
        self.group = group
        self.stream = stream
        self.flush_interval_s = flush_interval_s
        self.max_backoff_s = max_backoff_s
        self.max_queued = max_queued
        self._note = note
        self._clock = clock
        self._queue: deque[tuple[int, dict[str, Any]]] = deque()
        self._next_seq = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-shipper", daemon=True)
        self._last_ms = 0
        self._stream_ready = False
        self.dropped = 0
        self.sent = 0
        self.failures = 0
        self._failing = False
        self._deadline = float("inf")

    # -- producer side -------------------------------------------------------------------------

    def put(self, line: str) -> None:
        with self._lock:
            # Chronological order, even when the clock steps back (NTP).
            now_ms = max(int(self._clock() * 1000), self._last_ms)
            self._last_ms = now_ms
            self._queue.append((self._next_seq, {"timestamp": now_ms, "message": cut(line) or " "}))
            self._next_seq += 1
            while len(self._queue) > self.max_queued:
                self._queue.popleft()
                self.dropped += 1
            full = len(self._queue) >= MAX_BATCH_EVENTS
        if full:
            self._wake.set()

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout_s: float = 10.0) -> bool:
        """Stop the thread after a last flush (retried as usual), waiting at most ``timeout_s``. True when
        everything was sent."""
        self._deadline = time.monotonic() + timeout_s
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        with self._lock:
            return not self._queue

    # -- sender side ---------------------------------------------------------------------------

    def _batch(self) -> tuple[list[dict[str, Any]], int]:
        """The longest front of the queue that one PutLogEvents accepts (not removed from the queue), and the
        sequence number of its last event."""
        batch: list[dict[str, Any]] = []
        size = 0
        last_seq = -1
        with self._lock:
            for seq, event in self._queue:
                event_size = len(event["message"].encode()) + EVENT_OVERHEAD_BYTES
                if batch and (
                    len(batch) >= MAX_BATCH_EVENTS
                    or size + event_size > MAX_BATCH_BYTES
                    or event["timestamp"] - batch[0]["timestamp"] > MAX_BATCH_SPAN_MS
                ):
                    break
                batch.append(event)
                size += event_size
                last_seq = seq
        return batch, last_seq

    def _client_or_none(self) -> Any:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def _ensure_stream(self, client: Any) -> None:
        if self._stream_ready:
            return
        try:
            client.create_log_stream(logGroupName=self.group, logStreamName=self.stream)
        except Exception as err:
            if _error_code(err) != "ResourceAlreadyExistsException":
                raise
        self._stream_ready = True

    def _send(self, batch: list[dict[str, Any]]) -> None:
        client = self._client_or_none()
        self._ensure_stream(client)
        try:
            answer = client.put_log_events(logGroupName=self.group, logStreamName=self.stream, logEvents=batch)
        except Exception as err:
            if _error_code(err) == "ResourceNotFoundException":
                self._stream_ready = False  # deleted meanwhile: create it again on the next try
            raise
        rejected = (answer or {}).get("rejectedLogEventsInfo")
        if rejected:
            self._note(f"CloudWatch Logs rejected some events of {self.stream}: {rejected}")

    def _flush_once(self) -> bool:
        """Send one batch; True when the queue is empty afterwards or nothing could be sent."""
        batch, last_seq = self._batch()
        if not batch:
            return True
        self._send(batch)
        with self._lock:
            still_queued = 0
            while self._queue and self._queue[0][0] <= last_seq:
                self._queue.popleft()
                still_queued += 1
            # The rest of the batch was dropped from the queue by put() while on the wire, and counted as
            # lost; it was sent after all.
            self.dropped -= len(batch) - still_queued
            self.sent += len(batch)
            dropped, self.dropped = self.dropped, 0
            empty = not self._queue
        if dropped:
            self._note(
                f"{dropped} lines of this job were not shipped (CloudWatch Logs unreachable); see the node's file"
            )
        return empty

    def _run(self) -> None:
        backoff = 0.0
        while True:
            stopping = self._stopping.is_set()
            try:
                while not self._flush_once():
                    pass
                backoff = 0.0
                if self._failing:
                    self._failing = False
                    self._note(f"shipping to {self.group}:{self.stream} works again")
            except Exception as err:
                self.failures += 1
                backoff = min(self.max_backoff_s, max(0.5, backoff * 2))
                if not self._failing:  # once per outage, not once per retry
                    self._failing = True
                    self._note(f"cannot ship to {self.group}:{self.stream} ({_error_code(err)}: {err}); retrying")
                if stopping and time.monotonic() + backoff >= self._deadline:
                    return
            else:
                if stopping:
                    return
            self._wake.wait(backoff or self.flush_interval_s)
            self._wake.clear()
