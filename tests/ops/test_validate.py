"""gpu-platform validate: the config as synth reads it, clock checks, placeholders; exit codes 0/1/2."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from config.loader import ConfigError, load_platform
from ops.findings import Level
from ops.validate import validate
from tests.ops.helpers import config_dir, run_cli

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _block_fleet(start: datetime, end: datetime) -> dict[str, Any]:
    return {
        "name": "block",
        "role": "training",
        "instance_types": ["p5.48xlarge"],
        "efa": True,
        "availability_zones": ["us-east-1a"],
        "capacity": {"min": 2, "max": 2},
        "on_demand_percentage_above_base": 100,
        "capacity_block": {"id": "cr-0123456789abcdef0", "start": start.isoformat(), "end": end.isoformat()},
    }


def _with_block(start: datetime, end: datetime):
    def change(doc: dict[str, Any]) -> None:
        doc["fleets"].append(_block_fleet(start, end))

    return change


def _real_owner(doc: dict[str, Any]) -> None:
    doc["account"] = "123456789012"
    doc["notifications"]["emails"] = ["gpu-oncall@corp.internal"]


def test_a_config_error_is_the_line_synth_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = config_dir(tmp_path, change=lambda d: d["fleets"][1]["capacity"].update(min=5))  # inference
    with pytest.raises(ConfigError) as synth_error:
        load_platform(["dev"], folder)  # what app.py runs before synth
    code, out, err = run_cli(capsys, "validate", "--env", "dev", "--config-dir", str(folder))
    assert code == 2 and out == ""
    assert err.splitlines() == synth_error.value.lines
    assert "dev.yaml: fleets[1].capacity.min: 5 is more than max (4); fix: make min <= max" in err
    assert "Traceback" not in err


def test_placeholders_of_the_shipped_configs_are_warnings(tmp_path: Path) -> None:
    findings = validate(["dev"], config_dir(tmp_path), NOW)
    assert {(f.check, f.level) for f in findings} == {
        ("placeholder-account", Level.WARNING),
        ("example-notification-address", Level.WARNING),
    }
    account = next(f for f in findings if f.check == "placeholder-account")
    assert "111111111111" in account.message and account.fix
    assert validate(["dev"], config_dir(tmp_path, change=_real_owner), NOW) == []


def test_a_capacity_block_that_ended_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = config_dir(tmp_path, change=_with_block(NOW - timedelta(days=3), NOW - timedelta(days=1)))
    [finding] = [f for f in validate(["dev"], folder, NOW) if f.check == "capacity-block-window"]
    assert finding.level is Level.ERROR
    assert "fleets[2].capacity_block: the block cr-0123456789abcdef0 ended at" in finding.message  # appended
    code, out, _ = run_cli(capsys, "validate", "--env", "dev", "--config-dir", str(folder), "--json")
    assert code == 1  # against the real clock too: the window is in the past
    doc = json.loads(out)
    assert doc["exit_code"] == 1 and "ERROR" in {f["level"] for f in doc["findings"]}


def test_an_open_capacity_block_is_a_warning_and_a_future_one_is_fine(tmp_path: Path) -> None:
    open_now = config_dir(tmp_path, change=_with_block(NOW - timedelta(hours=1), NOW + timedelta(days=1)))
    [finding] = [f for f in validate(["dev"], open_now, NOW) if f.check == "capacity-block-window"]
    assert finding.level is Level.WARNING and "a first deploy of this fleet now fails" in finding.message
    # inside the 5 minutes before the fleet's scale-up action: still deployable
    just_started = config_dir(tmp_path, change=_with_block(NOW - timedelta(minutes=2), NOW + timedelta(days=1)))
    assert [f for f in validate(["dev"], just_started, NOW) if f.check == "capacity-block-window"] == []


def test_exit_codes_with_and_without_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = config_dir(tmp_path)
    assert run_cli(capsys, "validate", "--config-dir", str(folder))[0] == 0  # warnings only
    assert run_cli(capsys, "validate", "--config-dir", str(folder), "--strict")[0] == 1
    code, _, err = run_cli(capsys, "validate", "--env", "nope", "--config-dir", str(folder))
    assert code == 2 and len(err.splitlines()) == 1
    assert "nope.yaml: file not found; fix: create it, or choose an existing environment (dev, prod, staging)" in err


def test_the_shipped_config_validates_with_exit_0_without_loading_the_cdk() -> None:
    # What keeps validate under a second is that it never starts jsii (aws_cdk's import alone takes seconds);
    # -X importtime lists every module the process imported. Wall time is not asserted: it depends on the load.
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ops.cli", "validate"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "config valid" in run.stdout and "placeholder-account" in run.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "ops.validate" in imported  # the listing is real
    assert not {name for name in imported if name.split(".")[0] in ("aws_cdk", "jsii", "cdk_nag")}
