"""``preflight_command`` end to end: config file -> every check against a moto account -> output and exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from config.preflight import CHECK_NAMES
from ops.preflight.aws import NO_CREDENTIALS, Aws
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


def _json(capsys: pytest.CaptureFixture[str]) -> list[dict[str, str]]:
    return json.loads(capsys.readouterr().out)


def test_ready_account_passes_every_check(aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _bootstrapped(aws)
    stub = _quotas(aws)
    code = preflight_command("dev", True, _config(tmp_path), assembly=_assembly(tmp_path), aws=aws)
    stub.assert_no_pending_responses()
    findings = _json(capsys)
    assert code == 0
    assert {f["level"] for f in findings} == {"INFO"}
    # every check ran and said what it saw (dev has no reservations, blocks or Slurm: those report nothing)
    assert {f["check"] for f in findings} == set(CHECK_NAMES) - {
        "efa-support",
        "capacity-reservations",
        "capacity-blocks",
        "pcs",
    }


def test_quota_short_of_the_fleet_fails_with_its_fix(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _bootstrapped(aws)
    _quotas(aws, spot_g=0)
    code = preflight_command("dev", True, _config(tmp_path), assembly=_assembly(tmp_path), aws=aws)
    errors = [f for f in _json(capsys) if f["level"] == "ERROR"]
    assert code == 1
    # dev's two Spot G fleets: training (2 x g6.2xlarge, 8 vCPUs) and inference (4 x g4dn.2xlarge).
    assert [(f["check"], f["fix"]) for f in errors] == [
        (
            "vcpu-quotas",
            "request L-3819A6DF >= 16 in Service Quotas (ec2, us-east-1), or lower fleets[training].capacity.max",
        ),
        (
            "vcpu-quotas",
            "request L-3819A6DF >= 32 in Service Quotas (ec2, us-east-1), or lower fleets[inference].capacity.max",
        ),
    ]


def test_other_account_stops_after_the_account_check(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = preflight_command("dev", True, _config(tmp_path, account="111111111111"), aws=aws)
    findings = _json(capsys)
    assert code == 1
    assert [(f["check"], f["level"]) for f in findings] == [("account", "ERROR"), ("account", "INFO")]
    assert findings[1]["message"].startswith("skipped until account passes: region, cdk-bootstrap")


def test_suppressed_warning_is_shown_as_info(aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _bootstrapped(aws)
    _quotas(aws)
    # no synthesized assembly: cdk-bootstrap warns; --strict would fail on it unless suppressed
    config = _config(tmp_path, preflight={"suppress": ["cdk-bootstrap"]})
    code = preflight_command("dev", True, config, strict=True, assembly=tmp_path / "none", aws=aws)
    [bootstrap] = [f for f in _json(capsys) if f["check"] == "cdk-bootstrap"]
    assert code == 0
    assert bootstrap["level"] == "INFO" and bootstrap["message"].endswith("(WARNING suppressed in config)")


def test_unsuppressed_warning_fails_strict(aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _bootstrapped(aws)
    _quotas(aws)
    assert preflight_command("dev", True, _config(tmp_path), strict=True, assembly=tmp_path / "none", aws=aws) == 1


def test_unknown_check_in_config_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, preflight={"suppress": ["vcpu-quota"]})
    assert preflight_command("dev", False, config) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].endswith(
        "dev.yaml: preflight.suppress[0]: 'vcpu-quota' is not a preflight check; fix: did you mean 'vcpu-quotas'? "
        f"use one of {', '.join(CHECK_NAMES)}"
    )


def test_no_credentials_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    assert preflight_command("dev", False, _config(tmp_path)) == 2
    captured = capsys.readouterr()
    assert captured.err == NO_CREDENTIALS + "\n" and captured.out == ""


def test_rejected_credentials_are_one_line_and_exit_2(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub = Stubber(aws.client("sts"))
    stub.add_client_error(
        "get_caller_identity", "ExpiredToken", "The security token included in the request is expired"
    )
    stub.activate()
    assert preflight_command("dev", False, _config(tmp_path), aws=aws) == 2
    err = capsys.readouterr().err
    assert err.startswith("AWS rejected the credentials in us-east-1 (GetCallerIdentity failed (ExpiredToken")
    assert len(err.splitlines()) == 1


def test_denied_check_could_not_run_and_names_the_call(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _bootstrapped(aws)
    stub = Stubber(aws.client("service-quotas"))
    stub.add_client_error("get_service_quota", "AccessDeniedException", "not authorized")
    stub.activate()
    code = preflight_command("dev", True, _config(tmp_path), assembly=_assembly(tmp_path), aws=aws)
    [vcpu] = [f for f in _json(capsys) if f["check"] == "vcpu-quotas"]
    assert code == 0  # the other checks ran and passed; --strict fails on it (test_preflight_unchecked.py)
    assert vcpu["level"] == "UNCHECKED"
    assert vcpu["message"] == "could not run: GetServiceQuota failed (AccessDeniedException: not authorized)"
    assert "servicequotas:Get*/List*" in vcpu["fix"]


def test_table_for_people(aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _bootstrapped(aws)
    _quotas(aws)
    assert preflight_command("dev", False, _config(tmp_path), assembly=_assembly(tmp_path), aws=aws) == 0
    out = capsys.readouterr().out
    assert "preflight dev (account 123456789012, us-east-1)" in out
    assert "0 error(s), 0 warning(s), 0 could not run" in out


def test_table_shows_fixes_as_written(
    aws: Aws, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # one line per finding
    _bootstrapped(aws)
    _quotas(aws, spot_g=0)
    assert preflight_command("dev", False, _config(tmp_path), assembly=_assembly(tmp_path), aws=aws) == 1
    out = capsys.readouterr().out
    # rich would take "[inference]" for markup and drop it
    assert "or lower fleets[inference].capacity.max" in out
    assert "or lower fleets[training].capacity.max" in out
    assert "2 error(s), 0 warning(s)" in out


def test_default_session_is_made_for_the_config_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    made: list[str | None] = []
    real = boto3.session.Session

    def session(**kwargs: Any) -> boto3.session.Session:
        made.append(kwargs.get("region_name"))
        return real(**kwargs)

    monkeypatch.setattr(boto3.session, "Session", session)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    preflight_command("dev", False, _config(tmp_path))
    assert made == ["us-east-1"]
