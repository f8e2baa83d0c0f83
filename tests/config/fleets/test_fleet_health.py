"""The fleet's ``health:`` settings: defaults per role, the launch hook's timeout they need, one-line errors,
and the node side they must agree with (the DCGM level budgets of scripts/node/health/dcgm.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config.fleets import DCGM_LEVEL_SECONDS, Fleet
from tests.config.helpers import fleet, inference, load_error, valid_dev, write_env
from tests.scripts.node.helpers import NODE_DIR  # noqa: F401 - puts scripts/node on sys.path

# isort: split
from health.dcgm import DCGM_LEVEL_TIMEOUT_S


def test_defaults_per_role_and_the_hook_timeout_they_need() -> None:
    training = Fleet.model_validate(fleet())
    assert training.dcgm_level == 2
    assert training.launch_hook_timeout_seconds == 2400 + 600
    assert training.health_node_env == {"HEALTH_DCGM_LEVEL": "2", "HEALTH_DCGM": "auto"}
    serving = Fleet.model_validate(inference())
    assert serving.dcgm_level == 1
    assert serving.launch_hook_timeout_seconds == 2400 + 180


def test_a_deeper_level_lengthens_the_hook_and_reaches_the_node() -> None:
    deep = Fleet.model_validate(fleet(health={"dcgm_level": 4, "dcgm": "required", "extra_fatal_xids": [63, 92]}))
    assert deep.launch_hook_timeout_seconds == 2400 + 4500 <= 7200  # PutLifecycleHook's limit
    assert deep.health_node_env == {
        "HEALTH_DCGM_LEVEL": "4",
        "HEALTH_DCGM": "required",
        "HEALTH_EXTRA_FATAL_XIDS": "63,92",
    }


def test_the_config_and_the_node_budget_each_level_the_same() -> None:
    assert DCGM_LEVEL_SECONDS == DCGM_LEVEL_TIMEOUT_S


CASES = [
    pytest.param(
        {"dcgm_level": 2, "launch_hook_timeout_seconds": 1800},
        [
            "dev.yaml: fleets[0].health.launch_hook_timeout_seconds: 1800 is shorter than the launch needs (2400 s "
            "bootstrap + 600 s DCGM level 2 = 3000 s); fix: raise it to at least 3000 or lower health.dcgm_level"
        ],
        id="hook-too-short",
    ),
    pytest.param(
        {"dcgm_level": 5},
        [
            "dev.yaml: fleets[0].health.dcgm_level: 5 is invalid: Input should be less than or equal to 4; "
            "fix: use a value <= 4 (DCGM diagnostic levels are 1 to 4)"
        ],
        id="level-5",
    ),
    pytest.param(
        {"launch_hook_timeout_seconds": 9000},
        [
            "dev.yaml: fleets[0].health.launch_hook_timeout_seconds: 9000 is invalid: Input should be less than or "
            "equal to 7200; fix: use a value <= 7200 (PutLifecycleHook's range)"
        ],
        id="hook-above-api-limit",
    ),
    pytest.param(
        {"extra_fatal_xids": [63, 63]},
        ["dev.yaml: fleets[0].health.extra_fatal_xids: an Xid code is listed twice; fix: list each code once"],
        id="xid-twice",
    ),
    pytest.param(
        {"dcgm": "always"},
        None,
        id="bad-mode",
    ),
]


@pytest.mark.parametrize(("health", "expected"), CASES)
def test_invalid_health_gives_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, health: dict[str, Any], expected: list[str] | None
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["fleets"] = [fleet(health=health)]
    write_env(tmp_path, "dev", data)
    lines = load_error("dev", tmp_path)
    if expected is None:
        assert len(lines) == 1 and lines[0].startswith("dev.yaml: fleets[0].health.dcgm: 'always'"), lines
        assert "fix:" in lines[0]
    else:
        assert lines == expected
