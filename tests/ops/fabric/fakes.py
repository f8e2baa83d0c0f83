"""What the fabric-test tests share: staging's training fleet deployed in moto, its nodes' job runner played by
``FakeNodes`` (see tests/ops/fabric/test_command.py), and the check run in-process."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from ops.fabric.command import run_fabric_test
from tests.ops.helpers import config_dir, moto_session
from tests.scripts.node.helpers import NODE_DIR  # noqa: F401 - puts scripts/node on sys.path

# isort: split
from fabric.allreduce_bench import footer_lines, format_row, header_lines, measure, message_sizes

ACCOUNT, REGION = "222222222222", "us-east-1"  # tests/fixtures/config/staging.yaml
GROUP, DOCUMENT, LOG_GROUP = "gpu-platform-staging-training", "gpu-platform-staging-job", "/gpu-platform/staging/jobs"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def bench_output(nodes: int, busbw_gib: float) -> str:
    """What rank 0 of allreduce_bench.py prints for ``nodes`` p4d nodes reaching ``busbw_gib`` GB/s at 1 GiB."""
    ranks = nodes * 8
    rows = []
    for size in message_sizes(8, 2**30):
        seconds = size / (busbw_gib / (2 * (ranks - 1) / ranks) * 1e9)  # at the same rate for every size
        rows.append((size, measure(size, seconds, ranks), measure(size, seconds, ranks)))
    devices = [(1000 + r, f"node-{r // 8}", r % 8, "NVIDIA A100-SXM4-40GB") for r in range(ranks)]
    head = header_lines(min_bytes=8, max_bytes=2**30, factor=2, warmup=5, iters=20, ranks=devices)
    return "\n".join(head + [format_row(*r) for r in rows] + footer_lines(rows))


class FakeNodes:
    """The job runner of every node, as seen through SSM and CloudWatch Logs."""

    def __init__(
        self,
        session: boto3.session.Session,
        *,
        slow: str | None = None,
        fail: bool = False,
        refuse_start: str | None = None,
    ) -> None:
        self.logs = session.client("logs")
        self.commands: dict[str, dict[str, Any]] = {}
        self.sent: list[dict[str, Any]] = []  # the SendCommand requests, in order
        self.polls: dict[str, int] = {}
        self.slow, self.fail, self.refuse_start = slow, fail, refuse_start
        self.start_error = "runner: /fsx is not a Lustre mount (lustre-mount.service failed)"
        session.events.register("before-call.ssm.SendCommand", self.before_send)
        session.events.register("after-call.ssm.SendCommand", self.after_send)
        session.events.register("before-call.ssm.GetCommandInvocation", self.invocation)

    def before_send(self, params: dict[str, Any], **_: Any) -> None:
        self.sent.append(json.loads(params["body"]))  # the serialized request

    def after_send(self, parsed: dict[str, Any], **_: Any) -> None:
        request = self.sent[-1]
        params = {k: v[0] for k, v in request["Parameters"].items()}
        self.commands[parsed["Command"]["CommandId"]] = params
        if params["Action"] == "start":
            ids = sorted(request["InstanceIds"])
            busbw = 9.0 if self.slow in ids else 78.0
            for instance in ids:
                stream = f"{params['JobId']}/{instance}"
                self.logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
                lines = [f"{instance}:1:1 [0] NCCL INFO Using network AWS Libfabric"]
                if instance == ids[0]:
                    lines += bench_output(len(ids), busbw).splitlines()
                now = int(time.time() * 1000)  # CloudWatch Logs drops events older than 14 days
                self.logs.put_log_events(
                    logGroupName=LOG_GROUP,
                    logStreamName=stream,
                    logEvents=[{"timestamp": now + i, "message": m} for i, m in enumerate(lines)],
                )

    def invocation(self, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        params = json.loads(params["body"])  # the serialized request: CommandId, InstanceId
        job = self.commands[params["CommandId"]]
        key = f"{job['JobId']}/{params['InstanceId']}"
        if job["Action"] == "start" and params["InstanceId"] == self.refuse_start:
            body = {
                "Status": "Failed",
                "ResponseCode": 1,
                "StandardOutputContent": "",
                "StandardErrorContent": self.start_error,
            }
            return SimpleNamespace(status_code=200, headers={}), body
        if job["Action"] == "status":
            self.polls[key] = self.polls.get(key, 0) + 1
        ended = self.polls.get(key, 0) >= 2  # active at the first status poll, ended at the second
        state = ("failed" if self.fail else "inactive") if ended else "active"
        answer = {
            "job": job["JobId"],
            "instance_id": params["InstanceId"],
            "unit": f"gpu-job-{job['JobId']}.service",
            "state": state,
            "result": ("exit-code" if self.fail else "success") if ended else None,
            "exit_code": (1 if self.fail else 0) if ended else None,
            "started_at": "2026-03-01T12:00:00Z",
        }
        body = {"Status": "Success", "StandardOutputContent": json.dumps(answer) + "\n", "StandardErrorContent": ""}
        return SimpleNamespace(status_code=200, headers={}), body


@contextmanager
def fabric_account(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.session.Session]:
    """A moto session as staging's account, with the jobs log group the nodes write to."""
    with moto_session(monkeypatch, account=ACCOUNT, region=REGION) as session:
        session.client("logs").create_log_group(logGroupName=LOG_GROUP)
        yield session


def deploy_training(session: boto3.session.Session, count: int) -> list[dict[str, str]]:
    """The training group with ``count`` p4d nodes; their ids and private addresses, by id."""
    ec2 = session.client("ec2")
    image = ec2.register_image(Name="gpu-platform-test", RootDeviceName="/dev/xvda")["ImageId"]
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]
    template = ec2.create_launch_template(
        LaunchTemplateName="training", LaunchTemplateData={"ImageId": image, "InstanceType": "p4d.24xlarge"}
    )["LaunchTemplate"]["LaunchTemplateId"]
    session.client("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName=GROUP,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=0,
        MaxSize=4,
        DesiredCapacity=count,
        VPCZoneIdentifier=subnet["SubnetId"],
    )
    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    return sorted(({"id": i["InstanceId"], "ip": i["PrivateIpAddress"]} for i in instances), key=lambda n: n["id"])


def run(session: boto3.session.Session, capsys: pytest.CaptureFixture[str], tmp_path: Path, **options: Any):
    folder = config_dir(tmp_path, "staging")
    code = run_fabric_test(
        "staging", "training", json_out=True, config_dir=folder, session=session, now=lambda: NOW, **options
    )
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else {}), err
