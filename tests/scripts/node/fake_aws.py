"""A fake AWS endpoint on 127.0.0.1 for node scripts that run as subprocesses, backed by moto.

moto's mock lives in the test process, so a script started with ``subprocess`` (bootstrap.sh and
the helpers it runs) cannot reach it. Such a script is pointed here with ``AWS_ENDPOINT_URL``
instead: its real boto3 serializes real requests, and the server records each one's parameters
exactly as they went over the wire.

moto 5.2.5 knows Auto Scaling groups, launch templates and lifecycle hooks (put/describe), but not
the lifecycle wait states nor CompleteLifecycleAction / RecordLifecycleActionHeartbeat (both raise
NotImplementedError). ``LifecycleFleet`` keeps the group and its hooks in moto and adds the wait
states on top: a launched instance is in Pending:Wait until the launch hook is completed;
``begin_termination`` puts it in Terminating:Wait. A call that names a hook, group or instance
moto does not know, or a hook whose transition does not match the instance's wait state, gets the
ValidationError AWS answers then.

CloudWatch calls (``gpu_health.py`` publishes ``GpuHealthCheckFailed`` at boot) are recorded by
operation name with their raw body and answered with an empty result, in AWS JSON 1.0 or Smithy
RPC v2 CBOR, whichever protocol the client chose.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl

import boto3

from config.naming import launch_hook_name, terminate_hook_name
from tests.scripts.node.helpers import LoopbackServer

AUTOSCALING_XMLNS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
WAIT_STATE = {LAUNCHING: "Pending:Wait", TERMINATING: "Terminating:Wait"}
AFTER = {
    ("Pending:Wait", "CONTINUE"): "InService",
    ("Pending:Wait", "ABANDON"): "Terminating",
    ("Terminating:Wait", "CONTINUE"): "Terminated",
    ("Terminating:Wait", "ABANDON"): "Terminated",
}


class ApiError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class LifecycleFleet:
    """One Auto Scaling group in moto (launch template, one instance, a launch and a termination
    hook) and the lifecycle wait states moto does not model. Build it inside ``mock_aws()``."""

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        asg_name: str = "gpu-platform-test-p4d",
        launch_hook: str = launch_hook_name("gpu-platform-test-p4d"),
        terminate_hook: str = terminate_hook_name("gpu-platform-test-p4d"),
        instance_type: str = "p4d.24xlarge",
    ) -> None:
        self.region = region
        self.asg_name = asg_name
        self.launch_hook = launch_hook
        self.terminate_hook = terminate_hook
        ec2 = boto3.client("ec2", region_name=region)
        self.autoscaling = boto3.client("autoscaling", region_name=region)
        ec2.create_launch_template(
            LaunchTemplateName=f"{asg_name}-lt",
            LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": instance_type},
        )
        self.autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=asg_name,
            LaunchTemplate={"LaunchTemplateName": f"{asg_name}-lt", "Version": "$Latest"},
            MinSize=1,
            MaxSize=1,
            DesiredCapacity=1,
            AvailabilityZones=[f"{region}a"],
        )
        for name, transition, timeout in ((launch_hook, LAUNCHING, 1800), (terminate_hook, TERMINATING, 300)):
            self.autoscaling.put_lifecycle_hook(
                LifecycleHookName=name,
                AutoScalingGroupName=asg_name,
                LifecycleTransition=transition,
                HeartbeatTimeout=timeout,
                DefaultResult="ABANDON" if transition == LAUNCHING else "CONTINUE",
            )
        (instance,) = self.autoscaling.describe_auto_scaling_instances()["AutoScalingInstances"]
        self.instance_id: str = instance["InstanceId"]
        self._lock = threading.Lock()
        self.states: dict[str, str] = {self.instance_id: WAIT_STATE[LAUNCHING]}
        self.heartbeats: list[tuple[str, str]] = []

    def reset(self) -> None:
        """Back to a freshly launched instance (for a group shared by several tests)."""
        with self._lock:
            self.states = {self.instance_id: WAIT_STATE[LAUNCHING]}
            self.heartbeats.clear()

    def begin_termination(self) -> None:
        with self._lock:
            self.states[self.instance_id] = WAIT_STATE[TERMINATING]

    @property
    def state(self) -> str:
        return self.states[self.instance_id]

    def _waiting_on(self, params: dict[str, str]) -> str:
        """The wait state the named hook holds the instance in; ValidationError as AWS answers."""
        instance_id = params.get("InstanceId", "")
        asg_name = params.get("AutoScalingGroupName", "")
        hook_name = params.get("LifecycleHookName", "")
        no_action = ApiError("ValidationError", f"No active Lifecycle Action found with instance ID {instance_id}")
        hooks = self.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=asg_name)["LifecycleHooks"]
        transitions = {hook["LifecycleHookName"]: hook["LifecycleTransition"] for hook in hooks}
        if hook_name not in transitions:
            raise no_action
        members = self.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])["AutoScalingInstances"]
        if not any(member["AutoScalingGroupName"] == asg_name for member in members):
            raise no_action
        state = self.states.get(instance_id)
        if state != WAIT_STATE[transitions[hook_name]]:
            raise no_action
        return state

    def complete_lifecycle_action(self, params: dict[str, str]) -> None:
        result = params.get("LifecycleActionResult", "")
        if result not in ("CONTINUE", "ABANDON"):
            raise ApiError("ValidationError", f"Invalid LifecycleActionResult {result!r}")
        with self._lock:
            state = self._waiting_on(params)
            self.states[params["InstanceId"]] = AFTER[(state, result)]

    def record_lifecycle_action_heartbeat(self, params: dict[str, str]) -> None:
        with self._lock:
            self._waiting_on(params)
            self.heartbeats.append((params["LifecycleHookName"], params["InstanceId"]))


@dataclass
class FakeAws(LoopbackServer):
    """The endpoint: Auto Scaling (query protocol) through a LifecycleFleet, CloudWatch recorded."""

    fleet: LifecycleFleet
    calls: list[dict[str, str]] = field(default_factory=list)
    cloudwatch_calls: list[tuple[str, bytes]] = field(default_factory=list)
    fail: dict[str, ApiError] = field(default_factory=dict)

    def reset(self) -> None:
        """Forget the calls and failures, reset the fleet (for an endpoint shared by several tests)."""
        self.calls.clear()
        self.cloudwatch_calls.clear()
        self.fail.clear()
        self.fleet.reset()

    def client_env(self) -> dict[str, str]:
        """What a subprocess needs to send its AWS calls here and nowhere else."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": self.fleet.region,
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_MAX_ATTEMPTS": "1",
        }

    # -- request handling --

    def _autoscaling(self, params: dict[str, str]) -> tuple[int, str]:
        self.calls.append(params)
        action = params.get("Action", "")
        handlers: dict[str, Any] = {
            "CompleteLifecycleAction": self.fleet.complete_lifecycle_action,
            "RecordLifecycleActionHeartbeat": self.fleet.record_lifecycle_action_heartbeat,
        }
        request_id = str(uuid.uuid4())
        try:
            if action in self.fail:
                raise self.fail[action]
            if action not in handlers:
                raise ApiError("InvalidAction", f"the fake endpoint does not answer {action}")
            handlers[action](params)
        except ApiError as err:
            body = (
                f'<ErrorResponse xmlns="{AUTOSCALING_XMLNS}"><Error><Type>Sender</Type><Code>{err.code}</Code>'
                f"<Message>{err.message}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
            )
            return err.status, body
        body = (
            f'<{action}Response xmlns="{AUTOSCALING_XMLNS}"><{action}Result/>'
            f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></{action}Response>"
        )
        return 200, body

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                target = self.headers.get("X-Amz-Target")
                if target:  # AWS JSON 1.0: X-Amz-Target: <service>.<operation>
                    fake.cloudwatch_calls.append((target.rsplit(".", 1)[-1], raw))
                    self._reply(200, b"{}", {"Content-Type": "application/x-amz-json-1.0"})
                    return
                if self.path.startswith("/service/"):  # Smithy RPC v2 CBOR: /service/<svc>/operation/<op>
                    fake.cloudwatch_calls.append((self.path.rsplit("/", 1)[-1], raw))
                    self._reply(200, b"\xa0", {"Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"})
                    return
                status, body = fake._autoscaling(dict(parse_qsl(raw.decode(), keep_blank_values=True)))
                self._reply(status, body.encode(), {"Content-Type": "text/xml"})

            def _reply(self, status: int, data: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
