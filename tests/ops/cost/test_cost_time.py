"""gpu-platform cost prices time as the config spends it: schedules, Capacity Block windows, warm pools, the
commitment view; estimates flagged, what is left out listed, other regions priced or refused. Each money
figure below is worked out by hand in the comment above its assertion."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from config.loader import load_environment
from gpu_constructs.fleet import gpu_fleet
from ops.cost import blocks
from ops.cost.command import cost_command
from ops.cost.prices import PRICES_PATH, load_prices
from ops.cost.report import estimate
from ops.cost.schedule import Cron
from tests.ops.helpers import config_dir, run_cli

NOWHERE = Path("/nonexistent-cdk-out")
G4DN_XLARGE = 0.526  # config/catalog/gpu_instances.csv, On-Demand us-east-1
P4D = 21.957642


def _inference(doc: dict[str, Any], **changes: Any) -> dict[str, Any]:
    fleet = next(f for f in doc["fleets"] if f["name"] == "inference")
    fleet.update(changes)
    return fleet


def _report(tmp_path: Path, change: Any, env: str = "dev") -> dict[str, Any]:
    environment = load_environment(env, config_dir(tmp_path, env, change))
    return estimate(environment, load_prices(environment.region), NOWHERE)


def _fleet(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in report["fleets"] if f["name"] == name)


def test_a_weekday_daytime_fleet_is_priced_for_its_hours(tmp_path: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        # dev's inference schedules (nights-off 20:00, mornings-on 08:00 on weekdays, New York), On-Demand
        _inference(doc, instance_types=["g4dn.xlarge"], on_demand_percentage_above_base=100)

    fleet = _fleet(_report(tmp_path, change), "inference")
    # 2026 starts on a Thursday: 52 weeks and one Thursday, so 52 x 5 + 1 = 261 weekdays. Each runs one node
    # from 08:00 to 20:00 New York time: 12 h (both clock changes, 8 March and 1 November, fall on Sundays,
    # when the fleet is off). 261 x 12 = 3,132 h a year; a month is a twelfth: 261 h, at 1 node, 469 h at 0.
    assert fleet["schedule"]["hours_per_month"]["desired"] == {"0": 469.0, "1": 261.0}
    assert fleet["at"]["desired"]["node_hours_per_month"] == 261.0
    # 261 h x $0.526 = $137.286 a month, not 730 h x $0.526 = $383.98
    assert fleet["monthly_usd"] == {"all_on_demand": 137.29, "planned": 137.29}
    assert fleet["hourly_usd"]["planned"] == pytest.approx(G4DN_XLARGE)  # the rate while it runs
    # max: step scaling may take it to 4 nodes while it has one (261 h); at 0 nothing scales it out
    assert fleet["at"]["max"]["node_hours_per_month"] == 4 * 261.0


def test_dev_as_shipped_prices_its_inference_by_the_schedule(tmp_path: Path) -> None:
    fleet = _fleet(_report(tmp_path, None), "inference")
    # all Spot, estimate 0.526 x (1 - 0.70) = $0.1578 an hour; 261 h -> $41.19 a month
    assert fleet["monthly_usd"]["planned"] == pytest.approx(261 * 0.1578, abs=0.01)
    assert fleet["estimates"] == {"spot": True, "capacity_block": False}


def test_the_schedule_follows_the_clock_of_its_time_zone() -> None:
    mornings = Cron.parse("0 8 * * 1-5")
    zone = ZoneInfo("America/New_York")
    winter = list(mornings.between(zone, datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 1, 6, tzinfo=UTC)))
    summer = list(mornings.between(zone, datetime(2026, 7, 6, tzinfo=UTC), datetime(2026, 7, 7, tzinfo=UTC)))
    assert winter == [datetime(2026, 1, 5, 13, 0, tzinfo=UTC)]  # 08:00 EST
    assert summer == [datetime(2026, 7, 6, 12, 0, tzinfo=UTC)]  # 08:00 EDT


def _block(doc: dict[str, Any]) -> None:
    doc["fleets"].append(
        {
            "name": "block",
            "role": "training",
            "instance_types": ["p4d.24xlarge"],
            "efa": True,
            "availability_zones": ["us-east-1a"],
            "capacity": {"min": 2, "max": 2},
            "on_demand_percentage_above_base": 100,
            "root_volume_gib": 500,
            "capacity_block": {
                "id": "cr-0123456789abcdef0",
                "start": "2026-12-01T11:30:00Z",
                "end": "2026-12-03T11:30:00Z",
            },
        }
    )


def test_a_two_day_capacity_block_is_priced_for_its_window_once(tmp_path: Path) -> None:
    report = _report(tmp_path, _block)
    fleet = _fleet(report, "block")
    block = fleet["capacity_block"]
    # window: 1 December 11:30 to 3 December 11:30 UTC = 48 h. No table price and no --live: On-Demand,
    # flagged. 2 instances x 48 h x $21.957642 = $2,107.93368, paid once; not 2 x 730 h x $21.957642 =
    # $32,058.16 a month.
    assert (block["window_hours"], block["instances"]) == (48, 2)
    assert block["fee_usd"] == 2107.93
    assert block["estimate"] is True and fleet["estimates"]["capacity_block"] is True
    # EBS while the group runs, 5 min after the start to 1 h before the end: 46 h 55 min = 46.91667 h;
    # 2 x 500 GiB x $0.08 per GB-month x 46.91667 / 730 = $5.14155
    assert block["volumes_usd"] == 5.14
    assert report["total"]["capacity_blocks_once_usd"] == 2113.08  # 2,107.93368 + 5.14155
    # the month holds none of it
    assert fleet["monthly_usd"] == {"all_on_demand": 0.0, "planned": 0.0}
    assert "capacity_block" in report["estimates"]


def test_the_block_timing_is_the_fleet_stack_s() -> None:
    assert (blocks.START_DELAY, blocks.END_MARGIN) == (gpu_fleet.BLOCK_START_DELAY, gpu_fleet.BLOCK_END_MARGIN)


def test_a_warm_pool_pays_for_its_stopped_volumes(tmp_path: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        fleet = _inference(
            doc,
            instance_types=["g4dn.xlarge"],
            on_demand_percentage_above_base=100,
            capacity={"min": 1, "max": 4, "desired": 2},
            warm_pool={"min_size": 1},
        )
        fleet.pop("scaling")
        fleet["service"]["load_balancer"].pop("requests_per_target")

    items = {i["item"]: i for i in _report(tmp_path, change)["shared"]}
    # desired 2 of max 4: the pool holds max - desired = 2 stopped instances (at least min_size 1), every
    # hour: 2 x 200 GiB root (the default) x $0.08 per GB-month = $32 a month; at max it holds min_size: $16
    assert items["Warm pool volumes"]["monthly_usd"]["desired"] == pytest.approx(32.0)
    assert items["Warm pool volumes"]["monthly_usd"]["max"] == pytest.approx(16.0)


def test_fleets_on_demand_all_month_get_a_commitment_view(tmp_path: Path) -> None:
    report = _report(tmp_path, None, env="prod")
    views = {c["fleet"]: c for c in report["commitments"]}
    training = views["training"]
    # 2 x p4d.24xlarge in On-Demand Capacity Reservations every hour: 2 x $21.957642 x 730 = $32,058.16
    assert (training["instances"], training["on_demand_monthly_usd"]) == (2, 32058.16)
    one_year = next(p for p in training["plans"] if p["plan"] == "compute-1yr-no-upfront")
    # the table's assumed 20 % discount: $32,058.16 x 0.8 = $25,646.53, flagged as an estimate
    assert one_year["monthly_usd"] == pytest.approx(25646.53, abs=0.01) and one_year["estimate"] is True
    assert views["inference"]["instances"] == 2  # the On-Demand base; its Spot part is never committed
    assert "savings_plan" in report["estimates"]


def test_a_rate_in_the_table_replaces_the_assumed_discount(tmp_path: Path) -> None:
    table = yaml.safe_load(PRICES_PATH.read_text(encoding="utf-8"))
    table["savings_plans"]["us-east-1"]["compute-1yr-no-upfront"]["rates"] = {"p4d.24xlarge": 15.0}
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(table), encoding="utf-8")
    env = load_environment("prod", config_dir(tmp_path))
    [view] = [
        c for c in estimate(env, load_prices(env.region, path), NOWHERE)["commitments"] if c["fleet"] == "training"
    ]
    plan = next(p for p in view["plans"] if p["plan"] == "compute-1yr-no-upfront")
    assert (plan["monthly_usd"], plan["estimate"]) == (2 * 15.0 * 730, False)


def test_json_flags_estimates_and_lists_what_it_leaves_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "cost", "--env", "dev", "--json", "--config-dir", str(config_dir(tmp_path)))
    assert code == 0, err
    doc = json.loads(out)
    assert "--live" in doc["estimates"]["spot"]
    assert all(f["estimates"]["spot"] for f in doc["fleets"])  # both dev fleets are all Spot
    left = {item["item"] for item in doc["left_out"]}
    for item in ("CloudTrail data events", "VPC flow logs", "CloudWatch Logs ingestion and storage",
                 "S3 storage and requests (versioned buckets)", "KMS keys and requests", "image builds"):  # fmt: skip
        assert item in left
    assert all(item["why"] and item["pricing"].startswith("https://") for item in doc["left_out"])


def test_the_table_output_marks_estimates_and_names_what_is_not_priced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "cost", "--env", "dev", "--config-dir", str(config_dir(tmp_path, change=_block)))
    assert code == 0
    assert "~$" in out and "~ estimate (spot): " in out
    assert "not priced: VPC flow logs" in out and "not priced: KMS keys and requests" in out
    assert "Capacity Block cr-0123456789abcdef0" in out and "= ~$2,107.93 paid once" in out


def _moved(region: str) -> Any:
    def change(doc: dict[str, Any]) -> None:
        moved = json.loads(json.dumps(doc).replace("us-east-1", region))
        doc.clear()
        doc.update(moved)

    return change


def test_another_region_is_priced_from_its_own_sections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = yaml.safe_load(PRICES_PATH.read_text(encoding="utf-8"))
    table["on_demand"]["regions"]["eu-west-1"] = {
        "source": "https://aws.amazon.com/ec2/pricing/on-demand/",
        "as_of": "2026-12-01",
        "prices": {"g4dn.xlarge": 0.6, "g6.xlarge": 0.9},
    }
    table["spot"]["eu-west-1"] = table["spot"]["us-east-1"]
    table["services"]["eu-west-1"] = table["services"]["us-east-1"]
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(table), encoding="utf-8")
    assert cost_command("dev", True, False, config_dir(tmp_path, "dev", _moved("eu-west-1")), NOWHERE, path) == 0
    doc = json.loads(capsys.readouterr().out)
    inference = _fleet(doc, "inference")
    assert (doc["region"], inference["unit_prices_usd"]["on_demand"]) == ("eu-west-1", 0.6)
    assert inference["unit_prices_usd"]["spot"] == pytest.approx(0.6 * (1 - 0.70))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            _moved("eu-west-1"),
            "ops/cost/prices.yaml: eu-west-1: no prices for this region (the table is complete for us-east-1); fix: "
            "add on_demand.regions.eu-west-1.prices (g4dn.xlarge, g6.xlarge); spot.eu-west-1; services.eu-west-1 as "
            "us-east-1's are written",
        ),
        (
            lambda doc: _inference(doc)["scaling"]["schedules"][1].update(cron="0 25 * * 1-5"),
            # the config refuses it before cost reads it (config/fleets/scaling.py)
            "dev.yaml: fleets[1].scaling.schedules[1].cron: '0 25 * * 1-5': hour '25': '25' is outside 0-23; fix: ",
        ),
        (
            lambda doc: _inference(doc)["scaling"]["schedules"][0].update(time_zone="America/Nowhere"),
            "dev.yaml: fleets[1].scaling.schedules[0].time_zone: 'America/Nowhere' is not an IANA time zone; fix: ",
        ),
    ],
)
def test_what_cost_cannot_price_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, change: Any, expected: str
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    folder = config_dir(tmp_path, "dev", change)
    code, out, err = run_cli(capsys, "cost", "--env", "dev", "--live", "--config-dir", str(folder))
    assert (code, out) == (2, "")  # refused before --live looks for credentials
    assert err.count("\n") == 1 and expected in err
