"""lifecycle.py: the exact CompleteLifecycleAction / RecordLifecycleActionHeartbeat requests
(botocore Stubber: moto 5.2.5 implements neither), and how failures are reported."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

import tests.scripts.node.helpers  # noqa: F401 - puts scripts/node on sys.path

# isort: split
import lifecycle
from lifecycle import LifecycleError, LifecycleHook

IDENTITY = ["--hook-name", "fleet-launch", "--asg-name", "fleet", "--instance-id", "i-0123456789abcdef0"]
PARAMS = {"LifecycleHookName": "fleet-launch", "AutoScalingGroupName": "fleet", "InstanceId": "i-0123456789abcdef0"}


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Stubber]]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("autoscaling", region_name="eu-west-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize("result", ["CONTINUE", "ABANDON"])
def test_complete_sends_exactly_the_hook_group_instance_and_result(
    stubbed: tuple[Any, Stubber], result: str, capsys: pytest.CaptureFixture[str]
) -> None:
    client, stubber = stubbed
    stubber.add_response("complete_lifecycle_action", {}, {**PARAMS, "LifecycleActionResult": result})

    code = lifecycle.main(["complete", "--result", result, *IDENTITY, "--region", "eu-west-1"], client=client)

    assert code == 0
    assert f"completed fleet-launch with {result} for i-0123456789abcdef0" in capsys.readouterr().out


def test_heartbeat_sends_exactly_the_hook_group_and_instance(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    stubber.add_response("record_lifecycle_action_heartbeat", {}, PARAMS)
    assert lifecycle.main(["heartbeat", *IDENTITY, "--region", "eu-west-1"], client=client) == 0


def test_an_api_error_is_one_line_with_its_code_and_exit_1(
    stubbed: tuple[Any, Stubber], capsys: pytest.CaptureFixture[str]
) -> None:
    client, stubber = stubbed
    stubber.add_client_error(
        "complete_lifecycle_action",
        service_error_code="ValidationError",
        service_message="No active Lifecycle Action found with instance ID i-0123456789abcdef0",
    )

    code = lifecycle.main(["complete", "--result", "ABANDON", *IDENTITY, "--region", "eu-west-1"], client=client)

    assert code == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("lifecycle: CompleteLifecycleAction(fleet-launch, ABANDON) for i-0123456789abcdef0 in fleet")
    assert err.endswith("ValidationError: No active Lifecycle Action found with instance ID i-0123456789abcdef0")


def test_only_continue_and_abandon_are_results() -> None:
    with pytest.raises(SystemExit) as exit_info:
        lifecycle.main(["complete", "--result", "PROCEED", *IDENTITY, "--region", "eu-west-1"])
    assert exit_info.value.code == 2
    with pytest.raises(ValueError, match="CONTINUE, ABANDON"):
        LifecycleHook(object(), "h", "g", "i-1").complete("continue")


def test_an_empty_name_is_refused_before_any_call() -> None:
    code = lifecycle.main(
        ["complete", "--result", "CONTINUE", *IDENTITY[:2], "--asg-name", "", *IDENTITY[4:], "--region", "eu-west-1"],
        client=object(),
    )
    assert code == 2


def test_a_transport_error_is_a_lifecycle_error() -> None:
    class Unreachable:
        def record_lifecycle_action_heartbeat(self, **_: str) -> None:
            raise ConnectionError("could not connect to the endpoint URL")

    with pytest.raises(LifecycleError, match="ConnectionError: could not connect"):
        LifecycleHook(Unreachable(), "h", "g", "i-1").heartbeat()
