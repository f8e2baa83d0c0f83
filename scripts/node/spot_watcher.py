#!/usr/bin/env python3
"""Watch IMDSv2 for Spot notices and run a checkpoint hook once per notice kind.

Two notices are watched (AWS recommends polling about every 5 seconds):

* ``interruption``: ``/latest/meta-data/spot/instance-action`` answers 404 until EC2 decides to
  reclaim the instance, then ``{"action": "terminate" | "stop" | "hibernate", "time": "<UTC>"}``:
  the two-minute notice.
* ``rebalance``: ``/latest/meta-data/events/recommendations/rebalance`` answers 404 until the
  instance is at elevated risk of interruption, then ``{"noticeTime": "<UTC>"}``.

On a notice the hook command runs once for that kind (it is handed NOTICE_KIND, NOTICE_ACTION,
NOTICE_TIME and NOTICE_JSON in its environment). After the interruption notice has been handled
the watcher exits 0, since nothing can follow it; ``--keep-watching`` keeps it polling instead.
A rebalance recommendation never ends the watch: an interruption notice may still come.

Under Slurm (scripts/node/slurm_node.py), the interruption notice also drains this node with the notice as
the reason, before the hook (no new job lands here in the two minutes), and requeues the jobs running on it
after the hook (``scontrol requeue``): they start again on other nodes from their newest checkpoint.

The hook runs synchronously: polling pauses while it runs, and the interruption notice is checked
before the rebalance one in each poll, so a simultaneous pair checkpoints for the interruption.

Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imds_client import DEFAULT_IMDS_URL, DEFAULT_TOKEN_TTL_S, ImdsClient, ImdsError
from service_runtime import configure_logging, install_stop_handlers
from slurm_node import SlurmError, configured, leave, node_name

LOG = logging.getLogger("spot-watcher")

INTERRUPTION = "interruption"
REBALANCE = "rebalance"
NOTICE_PATHS: Mapping[str, str] = {  # checked in this order
    INTERRUPTION: "/latest/meta-data/spot/instance-action",
    REBALANCE: "/latest/meta-data/events/recommendations/rebalance",
}
DEFAULT_HOOK = str(Path(__file__).resolve().parent / "checkpoint-hook.sh")
DEFAULT_INTERVAL_S = 5.0
DEFAULT_HOOK_TIMEOUT_S = 110.0  # inside the two minutes of the interruption notice


@dataclass(frozen=True)
class Notice:
    kind: str
    body: str
    payload: Mapping[str, Any]

    @property
    def action(self) -> str:
        return str(self.payload.get("action", ""))

    @property
    def time(self) -> str:
        return str(self.payload.get("time") or self.payload.get("noticeTime") or "")

    def describe(self) -> str:
        if self.kind == INTERRUPTION:
            return f"Spot interruption notice: action={self.action or '?'} time={self.time or '?'}"
        return f"rebalance recommendation: noticeTime={self.time or '?'}"


def parse_notice(kind: str, body: str) -> Notice:
    """A 200 on a notice path is a notice, even if its body is not the JSON we expect."""
    try:
        payload = json.loads(body)
    except json.JSONDecodeError:
        payload = {}
    if not isinstance(payload, Mapping):
        payload = {}
    return Notice(kind=kind, body=body, payload=payload)


Hook = Callable[[Notice], int]


class CommandHook:
    """Run a command for a notice; its exit code is returned (124 on timeout, 127 if missing)."""

    def __init__(self, command: list[str], timeout_s: float = DEFAULT_HOOK_TIMEOUT_S) -> None:
        if not command:
            raise ValueError("the hook command is empty")
        self.command = command
        self.timeout_s = timeout_s

    def environment(self, notice: Notice) -> dict[str, str]:
        return {
            **os.environ,
            "NOTICE_KIND": notice.kind,
            "NOTICE_ACTION": notice.action,
            "NOTICE_TIME": notice.time,
            "NOTICE_JSON": notice.body,
        }

    def __call__(self, notice: Notice) -> int:
        try:
            completed = subprocess.run(self.command, env=self.environment(notice), timeout=self.timeout_s, check=False)
        except FileNotFoundError:
            LOG.error("hook %s not found", self.command[0])
            return 127
        except subprocess.TimeoutExpired:
            LOG.error("hook %s did not finish within %g s", shlex.join(self.command), self.timeout_s)
            return 124
        return completed.returncode


class SlurmDeparture:
    """The hook, and under Slurm on an interruption notice: drain, the hook, requeue (slurm_node.leave)."""

    def __init__(self, hook: Hook, node: str = "auto") -> None:
        self.hook = hook
        self.node = node  # the node's Slurm name, auto (found when the notice comes) or off

    def _slurm_node(self) -> str | None:
        if self.node == "off" or (self.node == "auto" and not configured()):
            return None
        try:
            return node_name(None if self.node == "auto" else self.node)
        except SlurmError as err:
            LOG.warning("not under Slurm: %s", err)
            return None

    def __call__(self, notice: Notice) -> int:
        node = self._slurm_node() if notice.kind == INTERRUPTION else None
        if node is None:
            return self.hook(notice)
        codes: list[int] = []

        def checkpoint() -> int:
            codes.append(self.hook(notice))
            return codes[-1]

        try:
            jobs = leave(node, notice.describe(), checkpoint)
            LOG.warning("Slurm node %s drained; requeued: %s", node, ", ".join(jobs) or "no running job")
        except SlurmError as err:
            LOG.error("Slurm: %s", err)
        return codes[-1] if codes else self.hook(notice)


class SpotWatcher:
    def __init__(self, imds: ImdsClient, hook: Hook, *, keep_watching: bool = False) -> None:
        self.imds = imds
        self.hook = hook
        self.keep_watching = keep_watching
        self.handled: dict[str, Notice] = {}
        self.polls = 0

    def _check(self, kind: str) -> Notice | None:
        try:
            body = self.imds.get(NOTICE_PATHS[kind])
        except ImdsError as err:
            LOG.warning("cannot read the %s notice: %s", kind, err)
            return None
        return None if body is None else parse_notice(kind, body)

    def _handle(self, notice: Notice) -> None:
        LOG.warning("%s; running the checkpoint hook", notice.describe())
        self.handled[notice.kind] = notice  # before the hook runs: a failing hook is not retried
        code = self.hook(notice)
        if code == 0:
            LOG.info("checkpoint hook for the %s notice succeeded", notice.kind)
        else:
            LOG.error("checkpoint hook for the %s notice exited %d", notice.kind, code)

    def poll_once(self) -> list[Notice]:
        """Check every notice kind not handled yet; run the hook for each new one."""
        self.polls += 1
        found = []
        for kind in NOTICE_PATHS:
            if kind in self.handled:
                continue
            notice = self._check(kind)
            if notice is None:
                continue
            self._handle(notice)
            found.append(notice)
            if self.done():
                break
        return found

    def done(self) -> bool:
        return not self.keep_watching and INTERRUPTION in self.handled

    def run(self, interval_s: float, *, max_polls: int | None = None, stop: threading.Event | None = None) -> int:
        stop = stop or threading.Event()
        while not stop.is_set():
            self.poll_once()
            if self.done():
                LOG.info("interruption notice handled; exiting")
                return 0
            if max_polls is not None and self.polls >= max_polls:
                LOG.info("stopping after %d polls", self.polls)
                return 0
            stop.wait(interval_s)
        LOG.info("stopped")
        return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Run a checkpoint hook on Spot interruption / rebalance notices.")
    parser.add_argument("--imds-url", default=DEFAULT_IMDS_URL)
    parser.add_argument("--token-ttl", type=int, default=DEFAULT_TOKEN_TTL_S, help="IMDSv2 token TTL, seconds")
    parser.add_argument("--imds-timeout", type=float, default=2.0, help="seconds per IMDS request")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, help="seconds between polls")
    parser.add_argument("--hook", default=DEFAULT_HOOK, help="command run on a notice (shell-style quoting)")
    parser.add_argument("--hook-timeout", type=float, default=DEFAULT_HOOK_TIMEOUT_S)
    parser.add_argument(
        "--keep-watching", action="store_true", help="keep polling after the interruption notice was handled"
    )
    parser.add_argument("--max-polls", type=int, help="stop after this many polls (diagnostics, tests)")
    parser.add_argument("--slurm-node", default="auto", help="the node's Slurm name; auto: found on a notice; off")
    return parser


def main(argv: list[str] | None = None, stop: threading.Event | None = None) -> int:
    configure_logging(LOG)
    args = build_parser().parse_args(argv)
    try:
        imds = ImdsClient(args.imds_url, token_ttl_s=args.token_ttl, timeout_s=args.imds_timeout)
        hook = SlurmDeparture(CommandHook(shlex.split(args.hook), timeout_s=args.hook_timeout), args.slurm_node)
    except ValueError as err:
        LOG.error("%s", err)
        return 2
    if stop is None:
        stop = threading.Event()
        install_stop_handlers(stop, LOG)
    LOG.info("watching %s every %g s; hook: %s", args.imds_url, args.interval, args.hook)
    watcher = SpotWatcher(imds, hook, keep_watching=args.keep_watching)
    return watcher.run(args.interval, max_polls=args.max_polls, stop=stop)


if __name__ == "__main__":
    sys.exit(main())
