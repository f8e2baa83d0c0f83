"""cost shows the planned month against the environment's AWS Budgets amount (config budget:)."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.loader import load_environment
from ops.cost.command import cost_command
from ops.cost.prices import load_prices
from ops.cost.report import estimate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "config"
NOWHERE = Path("/nonexistent-cdk-out")


def test_the_planned_month_as_a_share_of_the_budget() -> None:
    env = load_environment("dev", FIXTURES)
    assert env.budget is not None
    report = estimate(env, load_prices(env.region), NOWHERE)
    budget = report["budget"]
    assert budget["monthly_usd"] == env.budget.monthly_usd
    for level in ("desired", "max"):
        planned = report["total"]["at"][level]["monthly_usd"]["planned"]
        # e.g. a planned $281.68 against $1,000.00 is 28.2 %
        assert budget["planned_percent"][level] == round(100 * planned / env.budget.monthly_usd, 1)
    assert budget["planned_percent"]["max"] >= budget["planned_percent"]["desired"]


def test_an_environment_without_a_budget_has_none() -> None:
    env = load_environment("staging", FIXTURES)
    assert env.budget is None
    assert estimate(env, load_prices(env.region), NOWHERE)["budget"] is None


def test_the_table_names_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_command("dev", False, config_dir=FIXTURES, cdk_out=NOWHERE) == 0
    out = capsys.readouterr().out
    assert "budget: $1,000.00/month (AWS Budgets, the whole account); the planned month is " in out
