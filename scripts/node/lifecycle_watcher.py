#!/usr/bin/env python3
"""Give training a checkpoint window when the Auto Scaling group terminates this node.

The group's termination lifecycle hook holds a leaving instance in Terminating:Wait; IMDS then
answers ``Terminated`` on ``/latest/meta-data/autoscaling/target-lifecycle-state`` (``InService``
before, 404 outside a group). This watcher polls that path every ``--interval`` s; on
``Terminated`` it runs the checkpoint hook (``checkpoint-hook.sh`` next to it: SIGUSR1 to each
training job, wait for its new checkpoint on Lustre, which the file system exports to S3; or, if
the Spot watcher already asked for this departure, wait for and reuse that request), records a lifecycle heartbeat once the hook has run ``--heartbeat-after``
seconds and every ``--heartbeat-interval`` seconds after that, and finally completes the hook
with CONTINUE, whatever the hook's exit status: the instance goes either way, and CONTINUE only
ends the wait sooner. It then exits.

Scale-in, instance refresh, a rebalance replacement, an Unhealthy mark and the end of a Capacity
Block all terminate through the group, so all of them get the window; a Spot interruption gives
only its two minutes (spot_watcher.py handles that notice). The hook is handed
NOTICE_KIND=termination, NOTICE_ACTION=Terminated and NOTICE_TIME (UTC) in its environment.

Exit status: 0 the termination was handled and the hook completed, or the watch was stopped;
2 bad arguments; 3 the termination was handled but CompleteLifecycleAction failed (the hook's
heartbeat timeout then ends the wait). The unit does not restart on 2 or 3.

Python 3 standard library plus boto3 (imported only when the node is leaving).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from imds_client import DEFAULT_IMDS_URL, DEFAULT_TOKEN_TTL_S, ImdsClient, ImdsError
from lifecycle import CONTINUE, LifecycleError, LifecycleHook, autoscaling_client
from service_runtime import configure_logging, install_stop_handlers

LOG = logging.getLogger("lifecycle-watcher")

TARGET_STATE_PATH = "/latest/meta-data/autoscaling/target-lifecycle-state"
TERMINATED = "Terminated"
DEFAULT_HOOK = str(Path(__file__).resolve().parent / "checkpoint-hook.sh")
DEFAULT_INTERVAL_S = 5.0
DEFAULT_HOOK_TIMEOUT_S = 1800.0
DEFAULT_HEARTBEAT_AFTER_S = 60.0
DEFAULT_HEARTBEAT_INTERVAL_S = 60.0
KILL_GRACE_S = 5.0

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_COMPLETE_FAILED = 3

Clock = Callable[[], float]


def run_with_heartbeats(
    command: list[str],
    *,
    env: Mapping[str, str],
    timeout_s: float,
    heartbeat_after_s: float,
    heartbeat_interval_s: float,
    heartbeat: Callable[[], None],
    clock: Clock = time.monotonic,
) -> int:
    """Run ``command``; call ``heartbeat`` once it has run ``heartbeat_after_s`` and every
    ``heartbeat_interval_s`` after that. Returns its exit status, 124 when it was killed at
    ``timeout_s``, 127 when it does not exist. The command gets its own process group, so a
    timeout kills what it started as well."""
    try:
        process = subprocess.Popen(command, env=dict(env), start_new_session=True)
    except (FileNotFoundError, PermissionError) as err:
        LOG.error("hook %s cannot run: %s", command[0], err)
        return 127
    started = clock()
    deadline = started + timeout_s
    next_heartbeat = started + heartbeat_after_s
    while True:
        wait_s = max(0.0, min(deadline, next_heartbeat) - clock())
        try:
            return process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass
        now = clock()
        if now >= deadline:
            LOG.error("hook %s did not finish within %g s; killing it", shlex.join(command), timeout_s)
            _kill_group(process)
            return 124
        if now >= next_heartbeat:
            LOG.info("hook still running after %.1f s; recording a lifecycle heartbeat", now - started)
            heartbeat()
            next_heartbeat = now + heartbeat_interval_s


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=KILL_GRACE_S)
            break
        except subprocess.TimeoutExpired:
            continue


class LifecycleWatcher:
    """Poll the target lifecycle state; handle ``Terminated`` once."""

    def __init__(
        self,
        imds: ImdsClient,
        *,
        hook_command: list[str],
        hook_name: str,
        asg_name: str,
        instance_id: str | None,
        client_factory: Callable[[], Any],
        hook_timeout_s: float = DEFAULT_HOOK_TIMEOUT_S,
        heartbeat_after_s: float = DEFAULT_HEARTBEAT_AFTER_S,
        heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S,
    ) -> None:
        if not hook_command:
            raise ValueError("the hook command is empty")
        for name, value in (("hook name", hook_name), ("Auto Scaling group name", asg_name)):
            if not value:
                raise ValueError(f"the termination lifecycle {name} is empty")
        if hook_timeout_s <= 0 or heartbeat_after_s < 0 or heartbeat_interval_s <= 0:
            raise ValueError("hook timeout and heartbeat interval must be > 0, heartbeat-after >= 0")
        self.imds = imds
        self.hook_command = hook_command
        self.hook_name = hook_name
        self.asg_name = asg_name
        self.instance_id = instance_id
        self.client_factory = client_factory
        self.hook_timeout_s = hook_timeout_s
        self.heartbeat_after_s = heartbeat_after_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.polls = 0
        self.last_state: str | None = None
        self.handled = False
        self.hook_exit: int | None = None
        self.heartbeats = 0

    def read_state(self) -> str | None:
        try:
            body = self.imds.get(TARGET_STATE_PATH)
        except ImdsError as err:
            LOG.warning("cannot read the target lifecycle state: %s", err)
            return None
        state = body.strip() if body else None
        if state != self.last_state:
            LOG.info("target lifecycle state: %s", state or "none (404)")
            self.last_state = state
        return state

    def _hook(self) -> LifecycleHook:
        instance_id = self.instance_id or self.imds.instance_id()
        return LifecycleHook(self.client_factory(), self.hook_name, self.asg_name, instance_id)

    def _heartbeat(self, hook: LifecycleHook) -> None:
        try:
            hook.heartbeat()
            self.heartbeats += 1
        except LifecycleError as err:
            LOG.warning("%s", err)

    def hook_environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "NOTICE_KIND": "termination",
            "NOTICE_ACTION": TERMINATED,
            "NOTICE_TIME": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "NOTICE_JSON": "",
        }

    def handle_termination(self) -> int:
        self.handled = True
        hook: LifecycleHook | None
        try:
            hook = self._hook()
        except (ImdsError, ValueError) as err:
            LOG.error("the node is leaving but its identity is unknown (%s); running the hook without heartbeats", err)
            hook = None
        LOG.warning("the Auto Scaling group is terminating this node; running the checkpoint hook")
        self.hook_exit = run_with_heartbeats(
            self.hook_command,
            env=self.hook_environment(),
            timeout_s=self.hook_timeout_s,
            heartbeat_after_s=self.heartbeat_after_s,
            heartbeat_interval_s=self.heartbeat_interval_s,
            heartbeat=(lambda: self._heartbeat(hook)) if hook is not None else (lambda: None),
        )
        if self.hook_exit == 0:
            LOG.info("checkpoint hook succeeded")
        else:
            LOG.error("checkpoint hook exited %d; letting the termination go on", self.hook_exit)
        if hook is None:
            return EXIT_COMPLETE_FAILED
        try:
            hook.complete(CONTINUE)
        except LifecycleError as err:
            LOG.error("%s", err)
            return EXIT_COMPLETE_FAILED
        LOG.info("completed %s with CONTINUE for %s", self.hook_name, hook.instance_id)
        return EXIT_OK

    def run(self, interval_s: float, *, max_polls: int | None = None, stop: threading.Event | None = None) -> int:
        stop = stop or threading.Event()
        while not stop.is_set():
            self.polls += 1
            if self.read_state() == TERMINATED:
                return self.handle_termination()
            if max_polls is not None and self.polls >= max_polls:
                LOG.info("stopping after %d polls", self.polls)
                return EXIT_OK
            stop.wait(interval_s)
        LOG.info("stopped")
        return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="On Auto Scaling termination (target lifecycle state Terminated), run the checkpoint hook "
        "with lifecycle heartbeats, then complete the termination lifecycle hook with CONTINUE."
    )
    parser.add_argument("--hook-name", required=True, help="the group's termination lifecycle hook")
    parser.add_argument("--asg-name", required=True, help="the Auto Scaling group")
    parser.add_argument("--region", required=True)
    parser.add_argument("--instance-id", help="default: from IMDS")
    parser.add_argument("--imds-url", default=DEFAULT_IMDS_URL)
    parser.add_argument("--token-ttl", type=int, default=DEFAULT_TOKEN_TTL_S, help="IMDSv2 token TTL, seconds")
    parser.add_argument("--imds-timeout", type=float, default=2.0, help="seconds per IMDS request")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, help="seconds between polls")
    parser.add_argument("--hook", default=DEFAULT_HOOK, help="command run on termination (shell-style quoting)")
    parser.add_argument("--hook-timeout", type=float, default=DEFAULT_HOOK_TIMEOUT_S, help="seconds, then killed")
    parser.add_argument(
        "--heartbeat-after",
        type=float,
        default=DEFAULT_HEARTBEAT_AFTER_S,
        help="seconds of hook run time before the first heartbeat; keep it below the hook's HeartbeatTimeout",
    )
    parser.add_argument("--heartbeat-interval", type=float, default=DEFAULT_HEARTBEAT_INTERVAL_S)
    parser.add_argument("--max-polls", type=int, help="stop after this many polls (diagnostics, tests)")
    return parser


def main(
    argv: list[str] | None = None,
    stop: threading.Event | None = None,
    client_factory: Callable[[], Any] | None = None,
) -> int:
    configure_logging(LOG)
    args = build_parser().parse_args(argv)
    try:
        imds = ImdsClient(args.imds_url, token_ttl_s=args.token_ttl, timeout_s=args.imds_timeout)
        watcher = LifecycleWatcher(
            imds,
            hook_command=shlex.split(args.hook),
            hook_name=args.hook_name,
            asg_name=args.asg_name,
            instance_id=args.instance_id,
            client_factory=client_factory or (lambda: autoscaling_client(args.region)),
            hook_timeout_s=args.hook_timeout,
            heartbeat_after_s=args.heartbeat_after,
            heartbeat_interval_s=args.heartbeat_interval,
        )
    except ValueError as err:
        LOG.error("%s", err)
        return EXIT_USAGE
    if stop is None:
        stop = threading.Event()
        install_stop_handlers(stop, LOG)
    LOG.info(
        "watching %s%s every %g s for %s; hook: %s",
        args.imds_url,
        TARGET_STATE_PATH,
        args.interval,
        args.hook_name,
        args.hook,
    )
    return watcher.run(args.interval, max_polls=args.max_polls, stop=stop)


if __name__ == "__main__":
    sys.exit(main())
