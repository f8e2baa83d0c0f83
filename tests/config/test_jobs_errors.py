"""``jobs:`` mistakes (config/jobs.py): each gives its exact one-line error (file, field, value, fix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import config
from config.audit import LOG_RETENTION_DAYS
from tests.config.helpers import load_error, valid_dev, write_env

RETENTIONS = ", ".join(str(days) for days in LOG_RETENTION_DAYS)


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param(
            {"rendezvous_port": 80},
            "dev.yaml: jobs.rendezvous_port: 80 is invalid: Input should be greater than or equal to 1024; "
            "fix: use a value >= 1024",
            id="privileged-rendezvous-port",
        ),
        pytest.param(
            {"max_restarts": -1},
            "dev.yaml: jobs.max_restarts: -1 is invalid: Input should be greater than or equal to 0; "
            "fix: use a value >= 0",
            id="negative-restarts",
        ),
        pytest.param(
            {"log_retention_days": 31},
            f"dev.yaml: jobs.log_retention_days: 31 is not a CloudWatch Logs retention period; fix: use one of "
            f"{RETENTIONS}",
            id="retention-cloudwatch-does-not-offer",
        ),
        pytest.param(
            {"rendevous_port": 29400},
            "dev.yaml: jobs.rendevous_port: unknown key; fix: did you mean 'rendezvous_port'? remove it or use one "
            "of log_retention_days, max_restarts, rendezvous_port",
            id="misspelt-key",
        ),
    ],
)
def test_a_jobs_mistake_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: dict[str, Any], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["jobs"] = jobs
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == [expected]


def test_the_jobs_section_may_be_left_out(tmp_path: Path) -> None:
    """Its defaults: torchrun's c10d port, 3 restarts, the log retention of the environment's logging."""
    data = valid_dev()
    data.pop("jobs", None)
    write_env(tmp_path, "dev", data)
    env = config.load_environment("dev", config_dir=tmp_path)
    assert (env.jobs.rendezvous_port, env.jobs.max_restarts, env.jobs.log_retention_days) == (29400, 3, None)
