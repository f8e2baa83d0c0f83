"""A check that could not run is UNCHECKED, never a pass: with nothing checked preflight exits 2 with one line,
and ``--strict`` (CI) fails on any check that could not run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import Stubber

from config.preflight import CHECK_NAMES
from ops.preflight.aws import Aws
from ops.preflight.command import preflight_command
from tests.ops.preflight.preflight_fixtures import (
    bootstrapped as _bootstrapped,
)
from tests.ops.preflight.preflight_fixtures import (
    dev_assembly as _assembly,
)
from tests.ops.preflight.preflight_fixtures import (
    dev_quotas as _quotas,
)
from tests.ops.preflight.preflight_fixtures import (
    moto_dev_config as _config,
)


def _fail_calls(aws: Aws, error: Exception, *, except_service: str | None = None) -> None:
    """Every call of the session's clients fails with ``error`` before it is sent (but ``except_service``'s)."""

    def fail(event_name: str, **_: Any) -> None:
        if except_service is None or not event_name.startswith(f"before-call.{except_service}."):
            raise error

    aws.session.events.register("before-call", fail)


def _run(aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str], **options: Any) -> tuple[int, Any, str]:
    code = preflight_command("dev", True, _config(tmp_path), assembly=_assembly(tmp_path), aws=aws, **options)
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_aws_out_of_reach_checks_nothing_and_exits_2(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fail_calls(aws, EndpointConnectionError(endpoint_url="https://sts.us-east-1.amazonaws.com/"))
    code, findings, err = _run(aws, tmp_path, capsys)
    assert code == 2
    assert [(f["check"], f["level"]) for f in findings] == [(name, "UNCHECKED") for name in CHECK_NAMES]
    # the account could not be confirmed: the others are not run against an unknown account
    assert findings[1]["message"].startswith("not run: the account check could not run")
    assert err.count("\n") == 1
    assert err.startswith(
        f"preflight dev: nothing was checked: {len(CHECK_NAMES)} check(s) could not run, e.g. account"
    )
    assert err.rstrip().endswith("fix: check network access to AWS")


def test_credentials_that_may_read_nothing_check_nothing(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "Describe")
    _fail_calls(aws, denied, except_service="sts")  # any credentials may call GetCallerIdentity
    code, findings, err = _run(aws, tmp_path, capsys)
    assert code == 2
    levels = {f["check"]: f["level"] for f in findings}
    assert levels.pop("account") == "INFO" and set(levels.values()) == {"UNCHECKED"}
    assert "nothing was checked" in err and "fix: allow sts:GetCallerIdentity, ec2:Describe*" in err


def _one_denied(aws: Aws) -> None:
    _bootstrapped(aws)
    stub = Stubber(aws.client("service-quotas"))
    stub.add_client_error("get_service_quota", "AccessDeniedException", "not authorized")
    stub.activate()


def test_strict_fails_on_a_check_that_could_not_run(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_denied(aws)
    code, findings, err = _run(aws, tmp_path, capsys, strict=True)
    assert code == 1 and err == ""
    unchecked = [f for f in findings if f["level"] == "UNCHECKED"]
    assert unchecked[0]["check"] == "vcpu-quotas" and "AccessDeniedException" in unchecked[0]["message"]
    assert not any(f["level"] in ("ERROR", "WARNING") for f in findings)  # only the unchecked fail it


def test_without_strict_the_checks_that_ran_decide(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_denied(aws)
    code, _, err = _run(aws, tmp_path, capsys)
    assert (code, err) == (0, "")


def test_the_table_counts_what_could_not_run(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    _bootstrapped(aws)
    _quotas(aws)
    stub = Stubber(aws.client("sts"))  # the account check fails: the rest are not run
    stub.add_client_error("get_caller_identity", "Throttling", "Rate exceeded")
    stub.activate()
    assert preflight_command("dev", False, _config(tmp_path), assembly=_assembly(tmp_path), aws=aws) == 2
    out = capsys.readouterr().out
    assert "UNCHECKED" in out and f"0 error(s), 0 warning(s), {len(CHECK_NAMES)} could not run, 0 info" in out
