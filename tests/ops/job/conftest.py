"""Fixtures of the job command tests: staging's account in moto, and the nodes that answer the job document."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.ssm.models import SimpleSystemManagerBackend

from tests.ops.helpers import moto_session
from tests.ops.job.fakes import ACCOUNT, REGION, FakeNodes


@pytest.fixture
def nodes(monkeypatch: pytest.MonkeyPatch) -> FakeNodes:
    """The nodes' side of the job document, answering each SendCommand moto records (tests/ops/job/fakes.py)."""
    fake = FakeNodes()
    send = SimpleSystemManagerBackend.send_command
    get = SimpleSystemManagerBackend.get_command_invocation

    def send_command(backend: SimpleSystemManagerBackend, **kwargs: Any) -> Any:
        requested = list(kwargs["instance_ids"])
        command = send(backend, **kwargs)
        # moto adds every instance of the region to a command sent without Targets; AWS runs it on the ids given.
        command.instance_ids = requested
        command.invocations = [i for i in command.invocations if i["InstanceId"] in requested]
        command.target_count = command.completed_count = len(requested)
        for invocation in command.invocations:
            status, code, out, err = fake.run(invocation["InstanceId"], command.parameters)
            invocation.update(
                Status=status, StatusDetails=status, ResponseCode=code, StandardOutputContent=out,
                StandardErrorContent=err,
            )  # fmt: skip
        return command

    def get_command_invocation(backend: SimpleSystemManagerBackend, command_id: str, instance_id: str, *rest: Any):
        answer = get(backend, command_id, instance_id, *rest)
        key = (command_id, instance_id)
        fake.polled[key] = fake.polled.get(key, 0) + 1
        if fake.polled[key] <= fake.polls_in_progress:
            return {**answer, "Status": "InProgress", "ResponseCode": -1, "StandardOutputContent": ""}
        return answer

    monkeypatch.setattr(SimpleSystemManagerBackend, "send_command", send_command)
    monkeypatch.setattr(SimpleSystemManagerBackend, "get_command_invocation", get_command_invocation)
    monkeypatch.setattr("ops.job.remote.time.sleep", lambda _s: None)
    return fake


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.session.Session]:
    """Staging's account in moto."""
    with moto_session(monkeypatch, account=ACCOUNT, region=REGION) as session:
        yield session
