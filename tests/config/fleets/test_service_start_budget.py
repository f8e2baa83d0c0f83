"""A served fleet's launch hook covers the node's wait for its service (``service.start_timeout_seconds``),
on top of the bootstrap and its DCGM level; what cannot fit in a lifecycle hook is a one-line error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config.fleets import Fleet
from tests.config.helpers import inference, load_error, valid_dev, write_env

SERVICE = {
    "command": "python3 /opt/gpu-platform/examples/serve.py --port 8080",
    "load_balancer": {"allowed_cidrs": ["10.0.0.0/16"]},
}


def served(**service: Any) -> dict[str, Any]:
    return inference(service=SERVICE | service)


def test_the_hook_waits_for_the_service_start_too() -> None:
    assert Fleet.model_validate(served()).launch_hook_timeout_seconds == 2400 + 180 + 600
    assert Fleet.model_validate(served(start_timeout_seconds=1800)).launch_hook_timeout_seconds == 2400 + 180 + 1800
    assert Fleet.model_validate(inference()).launch_hook_timeout_seconds == 2400 + 180  # no service, no wait


@pytest.mark.parametrize(
    ("fleet", "line"),
    [
        (
            served(start_timeout_seconds=1200) | {"health": {"dcgm_level": 4}},
            "dev.yaml: fleets[0].service.start_timeout_seconds: the launch would need 8100 s (2400 s bootstrap + "
            "4500 s DCGM level 4 + 1200 s service start), more than a lifecycle hook's 7200 s; fix: lower "
            "service.start_timeout_seconds or health.dcgm_level",
        ),
        (
            served() | {"health": {"launch_hook_timeout_seconds": 2600}},
            "dev.yaml: fleets[0].health.launch_hook_timeout_seconds: 2600 is shorter than the launch needs (2400 s "
            "bootstrap + 180 s DCGM level 1 + 600 s service start = 3180 s); fix: raise it to at least 3180 or lower "
            "health.dcgm_level or service.start_timeout_seconds",
        ),
    ],
    ids=["beyond-hook-limit", "hook-too-short"],
)
def test_a_start_that_does_not_fit_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet: dict[str, Any], line: str
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["fleets"] = [fleet]
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == [line]
