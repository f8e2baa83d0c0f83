"""gpu-platform cost: the mix arithmetic by hand, the JSON shape, shared items, --live, the shipped promise."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from config.loader import CONFIG_DIR, load_environment
from gpu_constructs.network.vpc_endpoints import INTERFACE_SERVICES
from ops.cli import NO_CREDENTIALS
from ops.cost import mix
from ops.cost.command import cost_command
from ops.cost.live import block_duration_hours
from ops.cost.prices import load_prices
from ops.cost.report import estimate
from ops.cost.shared import INTERFACE_ENDPOINTS
from tests.ops.helpers import config_dir, run_cli

NOWHERE = Path("/nonexistent-cdk-out")


def _one_fleet(doc: dict[str, Any]) -> None:
    """dev with one g5.2xlarge fleet: base 1, 50 % On-Demand above it, 1..8 instances, desired 4."""
    fleet = next(f for f in doc["fleets"] if f["name"] == "inference")
    doc["fleets"] = [fleet]
    fleet.update(
        instance_types=["g5.2xlarge"],
        capacity={"min": 1, "max": 8, "desired": 4},
        on_demand_base_capacity=1,
        on_demand_percentage_above_base=50,
    )
    fleet.pop("scaling", None)


def test_hand_checked_mix(tmp_path: Path) -> None:
    env = load_environment("dev", config_dir(tmp_path, change=_one_fleet))
    report = estimate(env, load_prices(env.region), NOWHERE)
    [fleet] = report["fleets"]
    # g5.2xlarge: On-Demand $1.212 (catalog); Spot estimate 1.212 x (1 - 0.65) = $0.4242 in both zones.
    # desired 4: base 1 On-Demand; 3 above it, 50 % -> 1.5, rounded up to 2 On-Demand; 1 Spot.
    # planned 3 x 1.212 + 1 x 0.4242 = 4.0602; all On-Demand 4 x 1.212 = 4.848
    # 1 GPU per instance: $1.01505 per GPU-hour; saving 1 - 4.0602 / 4.848 = 16.25 %
    at = fleet["at"]["desired"]
    assert at["instances"] == {"on_demand": 3, "spot": 1, "reserved": 0, "capacity_block": 0}
    assert at["hourly_usd"]["planned"] == pytest.approx(4.0602)
    assert at["hourly_usd"]["all_on_demand"] == pytest.approx(4.848)
    assert at["usd_per_gpu_hour"] == pytest.approx(1.0151, abs=1e-4)
    assert at["saving_percent"] == pytest.approx(16.2, abs=0.05)
    assert fleet["hourly_usd"] == {"all_on_demand": 4.848, "planned": 4.0602}
    assert fleet["monthly_usd"]["planned"] == pytest.approx(4.0602 * 730, abs=0.01)
    # max 8: 1 + ceil(3.5) = 5 On-Demand, 3 Spot: 5 x 1.212 + 3 x 0.4242 = 7.3326
    assert fleet["at"]["max"]["instances"]["spot"] == 3
    assert fleet["at"]["max"]["hourly_usd"]["planned"] == pytest.approx(7.3326)
    # min 1: the base alone, all On-Demand
    assert fleet["at"]["min"]["saving_percent"] == 0.0
    assert (
        "short of the 70 % a Spot fleet should save (AWS: up to 90 %): 3 of 4 instances are On-Demand"
        in fleet["seed_promise"]
    )


def test_reservations_and_capacity_blocks_are_their_own_parts(tmp_path: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        _one_fleet(doc)
        doc["fleets"][0]["capacity_reservation"] = {"preference": "capacity-reservations-first"}

    env = load_environment("dev", config_dir(tmp_path, change=change))
    [fleet] = estimate(env, load_prices(env.region), NOWHERE)["fleets"]
    assert fleet["at"]["desired"]["instances"] == {"on_demand": 0, "spot": 1, "reserved": 3, "capacity_block": 0}
    assert fleet["at"]["desired"]["hourly_usd"]["reserved"] == pytest.approx(3 * 1.212)  # ODCR at On-Demand


def test_json_shape_and_shared_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = config_dir(tmp_path)
    code, out, err = run_cli(capsys, "cost", "--env", "prod", "--json", "--config-dir", str(folder))
    assert code == 0, err
    doc = json.loads(out)
    assert {"environment", "prices", "fleets", "total"} <= set(doc)
    assert doc["environment"] == "prod"
    assert set(doc["prices"]) == {"source", "as_of"} and doc["prices"]["as_of"] == "2026-01-21"
    for fleet in doc["fleets"]:
        assert {"name", "role", "gpus", "hourly_usd"} <= set(fleet)
        assert set(fleet["hourly_usd"]) == {"all_on_demand", "planned"}
    training = next(f for f in doc["fleets"] if f["name"] == "training")
    assert training["gpus"] == 16 and training["at"]["desired"]["instances"]["reserved"] == 2  # 2 x p4d, ODCR
    items = {item["item"]: item for item in doc["shared"]}
    # prod: PERSISTENT_2 4800 GiB at 250 MB/s/TiB, $0.210 per GB-month -> $1008 a month
    assert items["FSx for Lustre"]["monthly_usd"]["desired"] == pytest.approx(1008.0)
    # isolated: 11 interface endpoints in 3 zones at $0.01 -> $0.33 an hour
    assert items["Interface endpoints"]["hourly_usd"]["desired"] == pytest.approx(0.33)
    assert "NAT gateways" not in items
    total = doc["total"]
    shared_hourly = sum(item["hourly_usd"]["desired"] for item in doc["shared"])
    fleets_hourly = sum(f["hourly_usd"]["planned"] for f in doc["fleets"])
    assert total["hourly_usd"]["planned"] == pytest.approx(shared_hourly + fleets_hourly, abs=1e-3)
    assert total["monthly_usd"]["planned"] == pytest.approx(total["hourly_usd"]["planned"] * 730, abs=0.05)
    assert any("alarms not counted" in note for note in doc["notes"])


def test_dev_pays_for_its_nat_gateway(tmp_path: Path) -> None:
    env = load_environment("dev", config_dir(tmp_path))
    items = {i["item"]: i for i in estimate(env, load_prices(env.region), NOWHERE)["shared"]}
    assert items["NAT gateways"]["hourly_usd"]["desired"] == pytest.approx(0.05)  # 1 x (0.045 + 0.005)
    assert "Interface endpoints" not in items


def test_each_served_fleet_pays_for_its_load_balancer(tmp_path: Path) -> None:
    env = load_environment("dev", config_dir(tmp_path))
    served = [f for f in env.fleets if f.service is not None]
    assert len(served) == 1 and served[0].service is not None and served[0].service.load_balancer.internal
    report = estimate(env, load_prices(env.region), NOWHERE)
    items = {i["item"]: i for i in report["shared"]}
    lb = items["Load balancers"]
    assert lb["detail"] == "1 Application Load Balancer"
    assert lb["hourly_usd"] == {"min": 0.0225, "desired": 0.0225, "max": 0.0225}  # there at every size
    assert any(item["item"] == "load balancer capacity units" for item in report["left_out"])

    public = env.model_copy(
        update={
            "fleets": [
                f.model_copy(
                    update={
                        "service": f.service.model_copy(
                            update={"load_balancer": f.service.load_balancer.model_copy(update={"internal": False})}
                        )
                    }
                )
                if f.service is not None
                else f
                for f in env.fleets
            ]
        }
    )
    lb = {i["item"]: i for i in estimate(public, load_prices(env.region), NOWHERE)["shared"]}["Load balancers"]
    assert (
        lb["detail"]
        == "1 Application Load Balancer; 1 internet-facing x at least 2 public IPv4 addresses (more as it scales)"
    )
    assert lb["hourly_usd"]["desired"] == pytest.approx(0.0225 + 2 * 0.005)


def test_an_environment_without_a_served_fleet_has_no_load_balancer(tmp_path: Path) -> None:
    env = load_environment("prod", config_dir(tmp_path))
    assert all(f.service is None for f in env.fleets)
    assert "Load balancers" not in {i["item"] for i in estimate(env, load_prices(env.region), NOWHERE)["shared"]}


def test_the_endpoint_count_is_the_network_stack_s() -> None:
    assert len(INTERFACE_SERVICES) == INTERFACE_ENDPOINTS


def test_alarms_are_counted_from_the_synthesized_templates(synth: Any) -> None:
    env = synth.environments["prod"]
    expected_metric = sum(len(s.resources("AWS::CloudWatch::Alarm")) for s in synth.stacks.values() if s.env == "prod")
    expected_composite = sum(
        len(s.resources("AWS::CloudWatch::CompositeAlarm")) for s in synth.stacks.values() if s.env == "prod"
    )
    assert expected_metric > 0
    report = estimate(env, load_prices(env.region), synth.outdir / "assembly-prod")
    [alarms] = [i for i in report["shared"] if i["item"] == "CloudWatch alarms"]
    assert alarms["detail"] == f"{expected_metric} metric + {expected_composite} composite alarms"
    assert alarms["monthly_usd"]["desired"] == pytest.approx(expected_metric * 0.10 + expected_composite * 0.50)


def test_live_prices_replace_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def change(doc: dict[str, Any]) -> None:
        doc["fleets"].append(
            {
                "name": "block",
                "role": "training",
                "instance_types": ["p5.48xlarge"],
                "efa": True,
                "availability_zones": ["us-east-1a"],
                "capacity": {"min": 2, "max": 2},
                "on_demand_percentage_above_base": 100,
                "capacity_block": {
                    "id": "cr-0123456789abcdef0",
                    "start": "2026-12-01T11:30:00Z",
                    "end": "2026-12-03T11:30:00Z",
                },
            }
        )

    folder = config_dir(tmp_path, change=change)
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")  # noqa: S106 - stubbed
    stub = Stubber(ec2)
    when = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
    stub.add_response(
        "describe_spot_price_history",
        {
            "SpotPriceHistory": [
                {
                    "AvailabilityZone": z,
                    "InstanceType": "g4dn.xlarge",
                    "ProductDescription": "Linux/UNIX",
                    "SpotPrice": p,
                    "Timestamp": when,
                }
                for z, p in (("us-east-1a", "0.2000"), ("us-east-1b", "0.1000"))
            ]
        },
    )
    # 2 x p5.48xlarge for 48 h: $4,800 up front -> $50 per instance-hour
    stub.add_response(
        "describe_capacity_block_offerings",
        {
            "CapacityBlockOfferings": [
                {
                    "InstanceType": "p5.48xlarge",
                    "AvailabilityZone": "us-east-1a",
                    "InstanceCount": 2,
                    "CapacityBlockDurationHours": 48,
                    "UpfrontFee": "4800.00",
                    "CurrencyCode": "USD",
                },
                {
                    "InstanceType": "p5.48xlarge",
                    "AvailabilityZone": "us-east-1b",
                    "InstanceCount": 2,
                    "CapacityBlockDurationHours": 48,
                    "UpfrontFee": "10.00",
                    "CurrencyCode": "USD",
                },
            ]
        },
        {"InstanceType": "p5.48xlarge", "InstanceCount": 2, "CapacityDurationHours": 48},
    )
    with stub:
        assert cost_command("dev", True, True, folder, NOWHERE, ec2=ec2) == 0
    stub.assert_no_pending_responses()
    doc = json.loads(capsys.readouterr().out)
    fleets = {f["name"]: f for f in doc["fleets"]}
    assert fleets["inference"]["unit_prices_usd"]["spot"] == pytest.approx(0.15)  # mean of the two zones
    assert fleets["inference"]["hourly_usd"]["planned"] == pytest.approx(0.15)
    # the other zone's cheaper offer is not the fleet's zone
    assert fleets["block"]["unit_prices_usd"]["capacity_block"] == pytest.approx(50.0)
    assert fleets["block"]["hourly_usd"]["planned"] == pytest.approx(100.0)
    # the block's window, 48 h, at the offering's rate: 2 x 48 x $50 = $4,800, the offering's UpfrontFee
    assert fleets["block"]["capacity_block"]["fee_usd"] == pytest.approx(4800.0)
    assert "live from the account" in doc["prices"]["source"]
    # live figures are not estimates
    assert fleets["inference"]["estimates"] == {"spot": False, "capacity_block": False}
    assert fleets["block"]["estimates"]["capacity_block"] is False
    assert "capacity_block" not in doc["estimates"]
    # the answer had no g6.xlarge price: the training fleet keeps the table's estimate, flagged, with a note
    assert fleets["training"]["estimates"]["spot"] is True and "spot" in doc["estimates"]
    assert any("no live Spot price for g6.xlarge" in note for note in doc["notes"])


def test_block_durations_the_api_takes() -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    assert block_duration_hours(start, datetime(2026, 12, 1, 6, tzinfo=UTC)) == 24
    assert block_duration_hours(start, datetime(2026, 12, 11, tzinfo=UTC)) == 240
    assert block_duration_hours(start, datetime(2026, 12, 17, tzinfo=UTC)) == 21 * 24  # 16 days -> 3 weeks


def test_live_without_credentials_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, out, err = run_cli(capsys, "cost", "--env", "dev", "--live", "--config-dir", str(config_dir(tmp_path)))
    assert (code, out, err) == (2, "", NO_CREDENTIALS + "\n")


@pytest.mark.parametrize("env_name", ["dev", "staging"])
def test_shipped_inference_fleets_are_at_least_60_percent_below_on_demand(env_name: str) -> None:
    env = load_environment(env_name, CONFIG_DIR)
    fleet = next(f for f in env.fleets if f.name == "inference")
    rates = mix.rates(fleet, load_prices(env.region))
    desired = mix.price(fleet, fleet.capacity.desired or fleet.capacity.min, rates)
    all_on_demand_per_gpu = rates.on_demand / rates.gpus_per_instance
    assert desired.per_gpu_hour <= 0.40 * all_on_demand_per_gpu
    assert desired.saving >= 0.60
