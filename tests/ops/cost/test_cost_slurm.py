"""gpu-platform cost of a Slurm environment (tests/fixtures/config/slurm/hpc.yaml): the PCS cluster's controller,
accounting, login nodes and node fee, and each Slurm fleet's month as a range, min to max, worked out by hand.

The PCS figures below are test figures, not AWS's: the shipped table's are AWS's list prices once written, and
until then each is null and not priced (the last tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.loader import ConfigError, load_environment
from ops.cost.command import cost_command
from ops.cost.prices import PRICES_PATH, PriceTable, load_prices
from ops.cost.report import estimate
from tests.synth import SLURM_DIR

SLURM = SLURM_DIR
NOWHERE = Path("/nonexistent-cdk-out")
#: Test figures (USD per hour), chosen to make the arithmetic plain; not AWS's prices.
CONTROLLER_SMALL, ACCOUNTING_SMALL, NODE_FEE = 2.00, 0.25, 0.01


def _table(tmp_path: Path, pcs: dict[str, Any] | None = None, **sections: Any) -> Path:
    """The shipped price table with ``pcs.us-east-1`` (and any other top-level section) replaced."""
    data = yaml.safe_load(PRICES_PATH.read_text(encoding="utf-8"))
    if pcs is not None:
        data["pcs"]["us-east-1"] = pcs
        data["pcs"]["as_of"] = "2026-11-26"
    data.update(sections)
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _priced(tmp_path: Path) -> PriceTable:
    pcs = {
        "controller_hour": {"small": CONTROLLER_SMALL, "medium": 9.0, "large": 30.0},
        "accounting_hour": {"small": ACCOUNTING_SMALL, "medium": 1.0, "large": 3.0},
        "node_management_instance_hour": NODE_FEE,
    }
    return load_prices("us-east-1", _table(tmp_path, pcs))


def _shared(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["item"]: item for item in report["shared"]}


def test_hand_checked_slurm_environment(tmp_path: Path) -> None:
    env = load_environment("hpc", SLURM)
    report = estimate(env, _priced(tmp_path), NOWHERE)
    shared = _shared(report)
    # The cluster: small (32 nodes), accounting on, 1 login node (m7i.large, $0.1008 On-Demand), every hour.
    #   controller   2.00 x 730 = 1,460.00 a month
    #   accounting   0.25 x 730 =   182.50
    #   login        1 x 0.1008 x 730 = 73.584
    assert shared["PCS cluster controller (small)"]["monthly_usd"] == dict.fromkeys(("min", "desired", "max"), 1460.0)
    assert shared["PCS Slurm accounting (small)"]["monthly_usd"]["max"] == 182.5
    assert shared["Slurm login nodes"]["monthly_usd"]["desired"] == pytest.approx(73.58)
    # Node fee 0.01 per instance-hour of the nodes PCS manages (the Capacity Block fleet's run in its window):
    #   min: login 1 x 730 = 730 node-h -> 7.30;  max: training 4 x 730 + small 2 x 730 + login 730 = 5,110 -> 51.10
    fee = shared["PCS node management"]["monthly_usd"]
    assert (fee["min"], fee["desired"], fee["max"]) == (7.3, 7.3, 51.1)
    cluster = report["slurm"]
    assert cluster["managed_node_hours_per_month"] == {"min": 730.0, "max": 5110.0}
    # 1,460 + 182.50 + 73.584 + 7.30 = 1,723.384;  at max the fee is 51.10: 1,767.184
    assert cluster["monthly_usd"] == {"min": 1723.38, "max": 1767.18}
    assert cluster["usd_per_hour"] == {
        "login_nodes": 0.1008,
        "controller": 2.0,
        "accounting": 0.25,
        "node_management_per_instance": 0.01,
    }
    # block: 2 x p5.48xlarge in their window of 48 h less 5 min and 60 min: 2 x 46.9167 h x 0.01 = 0.94, once
    assert cluster["capacity_blocks_node_management_once_usd"] == pytest.approx(0.94)
    assert cluster["not_priced"] == [] and cluster["list_prices"] is True


def test_a_slurm_fleet_is_a_range_from_min_to_max_not_desired_all_month(tmp_path: Path) -> None:
    env = load_environment("hpc", SLURM)
    report = estimate(env, _priced(tmp_path), NOWHERE)
    fleets = {f["name"]: f for f in report["slurm"]["fleets"]}
    # training: p4d.24xlarge, min 0, max 4; at max base 1 + ceil(3 x 50 %) = 3 On-Demand (in the account's open
    # reservations: ODCR, billed at On-Demand $21.957642) and 1 Spot (21.957642 x (1 - 0.55) = 9.8809389):
    #   3 x 21.957642 + 9.8809389 = 75.7538649 an hour; x 730 h = 55,300.32 a month; 4 x 730 = 2,920 node-h
    assert fleets["training"] == {
        "name": "training",
        "queue": "training",
        "min_nodes": 0,
        "max_nodes": 4,
        "node_hours_per_month": {"min": 0.0, "max": 2920.0},
        "monthly_usd": {"min": 0.0, "max": 55300.32},
        "capacity_block": False,
    }
    # small: 2 x g6.xlarge Spot at max, 0.8048 x (1 - 0.65) = 0.28168 each: 0.56336 x 730 = 411.25; 1,460 node-h
    assert fleets["small"]["monthly_usd"] == {"min": 0.0, "max": 411.25}
    assert fleets["small"]["node_hours_per_month"]["max"] == 1460.0
    # block: its instances are its Capacity Block's, paid once (the fleet's capacity_block), not a month
    assert fleets["block"]["monthly_usd"] is None and fleets["block"]["capacity_block"] is True
    assert [f["scheduler"] for f in report["fleets"]] == ["slurm", "slurm", "slurm", "none"]
    assert "not desired x 730 h" in report["slurm"]["note"]


def test_the_totals_count_the_cluster_at_every_level(tmp_path: Path) -> None:
    report = estimate(load_environment("hpc", SLURM), _priced(tmp_path), NOWHERE)
    for level in ("min", "desired", "max"):
        fleets = sum(f["at"][level]["monthly_usd"]["planned"] for f in report["fleets"] if not f["capacity_block"])
        shared = sum(item["monthly_usd"][level] for item in report["shared"])
        assert report["total"]["at"][level]["monthly_usd"]["planned"] == pytest.approx(fleets + shared, abs=0.05)


def test_the_table_labels_a_slurm_fleet_s_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _table(tmp_path, {"controller_hour": {"small": CONTROLLER_SMALL}, "node_management_instance_hour": 0})
    assert cost_command("hpc", False, config_dir=SLURM, cdk_out=NOWHERE, prices_path=path) == 0
    out = capsys.readouterr().out
    assert "min (idle)" in out and "max (busy)" in out
    assert "training: Slurm queue on AWS PCS: $0.00 idle at min (0 node-h) to ~$55,300.32 busy at max (2,920 " in out
    assert "PCS cluster controller (small)" in out and "Slurm login nodes" in out
    # a fee of 0: PCS lists none, nothing to price or to list
    assert "PCS node management" not in out
    # accounting on and no figure for it: listed, not priced
    assert "not priced: PCS Slurm accounting (small): AWS PCS charges its managed Slurm accounting per hour" in out


def test_figures_not_written_yet_are_listed_not_priced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nulls = {"controller_hour": {"small": None}, "accounting_hour": {}, "node_management_instance_hour": None}
    path = _table(tmp_path, nulls)
    assert cost_command("hpc", True, config_dir=SLURM, cdk_out=NOWHERE, prices_path=path) == 0
    report = json.loads(capsys.readouterr().out)
    names = [item["item"] for item in report["left_out"]]
    assert {"PCS cluster controller (small)", "PCS Slurm accounting (small)", "PCS node management"} <= set(names)
    controller = next(item for item in report["left_out"] if item["item"] == "PCS cluster controller (small)")
    assert "write pcs.us-east-1.controller_hour.small (USD per hour)" in controller["why"]
    assert controller["pricing"] == "https://aws.amazon.com/pcs/pricing/"
    # what is priced: the login nodes alone
    assert report["slurm"]["monthly_usd"] == {"min": 73.58, "max": 73.58}
    assert "PCS Slurm accounting storage" in names  # per GB-month of job records: never priced here


def test_an_environment_without_slurm_has_no_cluster(tmp_path: Path) -> None:
    report = estimate(load_environment("dev", SLURM.parent), _priced(tmp_path), NOWHERE)
    assert report["slurm"] is None
    assert not [item for item in report["shared"] if "PCS" in item["item"] or "login" in item["item"]]
    assert {f["scheduler"] for f in report["fleets"]} == {"none"}


def test_a_login_type_the_table_lacks_is_one_line(tmp_path: Path) -> None:
    path = _table(tmp_path, on_demand_cpu={"source": "x", "as_of": "2026-11-26", "us-east-1": {}})
    with pytest.raises(ConfigError) as err:
        cost_command("hpc", True, config_dir=SLURM, cdk_out=NOWHERE, prices_path=path)
    [line] = err.value.lines
    assert line.startswith(f"{path}: on_demand_cpu.us-east-1 (m7i.large): missing; fix: add them")


def test_the_shipped_table_has_every_pcs_figure_as_a_list_price_or_not_yet() -> None:
    data = yaml.safe_load(PRICES_PATH.read_text(encoding="utf-8"))
    pcs = data["pcs"]
    assert pcs["source"].startswith("https://aws.amazon.com/pcs/pricing/") and "list prices" in pcs["source"]
    region = pcs["us-east-1"]
    figures = [*region["controller_hour"].values(), *region["accounting_hour"].values()]
    figures.append(region["node_management_instance_hour"])
    assert set(region["controller_hour"]) == set(region["accounting_hour"]) == {"small", "medium", "large"}
    # each figure is written (a price, with the day it was read) or not yet (null): never a guess without a date
    assert all(f is None or (isinstance(f, int | float) and f >= 0) for f in figures)
    assert pcs["as_of"] is not None or all(f is None for f in figures)
    assert data["on_demand_cpu"]["us-east-1"]["m7i.large"] == 0.1008
