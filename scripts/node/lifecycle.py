#!/usr/bin/env python3
"""Auto Scaling lifecycle actions of this node: complete a hook, record a heartbeat.

The fleet's group has two lifecycle hooks. The launch hook holds a new instance in Pending:Wait
until bootstrap.sh completes it (CONTINUE: put it in service; ABANDON: the group terminates and
replaces it). The termination hook holds a leaving instance in Terminating:Wait until
lifecycle_watcher.py has let training checkpoint, then completes it with CONTINUE. Both name the
instance by id (no lifecycle action token: the node never sees the notification).

    lifecycle.py complete --result CONTINUE|ABANDON --hook-name H --asg-name G --instance-id I --region R
    lifecycle.py heartbeat --hook-name H --asg-name G --instance-id I --region R

Exit status: 0 done; 1 the call failed (one line on stderr: the API's error code and message);
2 bad arguments. Python 3 standard library plus boto3 (imported only when a call is made).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

CONTINUE = "CONTINUE"
ABANDON = "ABANDON"
RESULTS = (CONTINUE, ABANDON)


class LifecycleError(RuntimeError):
    """A lifecycle API call failed; the message names the call, the error code and the hook."""


def autoscaling_client(region: str) -> Any:
    """A client with standard retries (throttling and 5xx are retried, a ValidationError is not)."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=15)
    return boto3.session.Session(region_name=region).client("autoscaling", config=config)


def _describe(err: Exception) -> str:
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return f"{error.get('Code', '?')}: {error.get('Message', '')}".rstrip(": ")
    return f"{type(err).__name__}: {err}"


@dataclass(frozen=True)
class LifecycleHook:
    """One lifecycle hook of one group, acted on for one instance."""

    client: Any
    hook_name: str
    asg_name: str
    instance_id: str

    def _params(self) -> dict[str, str]:
        return {
            "LifecycleHookName": self.hook_name,
            "AutoScalingGroupName": self.asg_name,
            "InstanceId": self.instance_id,
        }

    def complete(self, result: str) -> None:
        if result not in RESULTS:
            raise ValueError(f"lifecycle action result must be one of {', '.join(RESULTS)}, got {result!r}")
        try:
            self.client.complete_lifecycle_action(**self._params(), LifecycleActionResult=result)
        except Exception as err:  # botocore's errors share no base class worth importing here
            raise LifecycleError(
                f"CompleteLifecycleAction({self.hook_name}, {result}) for {self.instance_id} in {self.asg_name} "
                f"failed: {_describe(err)}"
            ) from err

    def heartbeat(self) -> None:
        try:
            self.client.record_lifecycle_action_heartbeat(**self._params())
        except Exception as err:
            raise LifecycleError(
                f"RecordLifecycleActionHeartbeat({self.hook_name}) for {self.instance_id} in {self.asg_name} "
                f"failed: {_describe(err)}"
            ) from err


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Complete a lifecycle hook of this node, or record a heartbeat.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("complete", "CompleteLifecycleAction"), ("heartbeat", "RecordLifecycleActionHeartbeat")):
        command = commands.add_parser(name, help=help_text)
        if name == "complete":
            command.add_argument("--result", required=True, choices=RESULTS)
        command.add_argument("--hook-name", required=True)
        command.add_argument("--asg-name", required=True)
        command.add_argument("--instance-id", required=True)
        command.add_argument("--region", required=True)
    return parser


def main(argv: list[str] | None = None, client: Any = None) -> int:
    args = build_parser().parse_args(argv)
    for flag in ("hook_name", "asg_name", "instance_id", "region"):
        if not getattr(args, flag):
            print(f"lifecycle: --{flag.replace('_', '-')} is empty", file=sys.stderr)
            return 2
    try:
        hook = LifecycleHook(client or autoscaling_client(args.region), args.hook_name, args.asg_name, args.instance_id)
        if args.command == "complete":
            hook.complete(args.result)
            print(f"lifecycle: completed {args.hook_name} with {args.result} for {args.instance_id}")
        else:
            hook.heartbeat()
            print(f"lifecycle: recorded a heartbeat on {args.hook_name} for {args.instance_id}")
    except LifecycleError as err:
        print(f"lifecycle: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
