"""Preflight reservations: On-Demand Capacity Reservations and Capacity Blocks (DescribeCapacityReservations,
which moto lacks, answered by botocore's Stubber)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from botocore.stub import Stubber

from config.fleets.capacity import Capacity, CapacityBlock, CapacityReservation
from ops.findings import Level
from ops.preflight.aws import Aws
from ops.preflight.reservations import check_blocks, check_reservations
from tests.ops.preflight.preflight_fixtures import (
    environment,
    fleet_changed,
)

START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
END = datetime(2026, 12, 3, 11, 30, tzinfo=UTC)


def _reservation(rid: str, **fields: Any) -> dict[str, Any]:
    return {
        "CapacityReservationId": rid,
        "InstanceType": "p4d.24xlarge",
        "AvailabilityZone": "us-east-1a",
        "InstancePlatform": "Linux/UNIX",
        "Tenancy": "default",
        "State": "active",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2,
        "InstanceMatchCriteria": "targeted",
        "ReservationType": "default",
        **fields,
    }


def _stub(aws: Aws, *answers: tuple[dict[str, Any], dict[str, Any] | str]) -> Stubber:
    """(expected params, response or an error code) in call order."""
    stub = Stubber(aws.client("ec2"))
    for params, answer in answers:
        if isinstance(answer, str):
            stub.add_client_error("describe_capacity_reservations", answer, "not found", expected_params=params)
        else:
            stub.add_response("describe_capacity_reservations", answer, params)
    stub.activate()
    return stub


def _with_ids(*ids: str):
    spec = CapacityReservation(preference="capacity-reservations-first", ids=list(ids))
    return fleet_changed(environment("prod"), 0, capacity_reservation=spec)


def test_named_reservations_matching_and_covering_the_base(aws: Aws) -> None:
    ids = ["cr-0123456789abcdef0", "cr-0123456789abcdef1"]
    _stub(
        aws,
        (
            {"CapacityReservationIds": ids},
            {"CapacityReservations": [_reservation(ids[0]), _reservation(ids[1], AvailableInstanceCount=0)]},
        ),
    )
    [finding] = check_reservations(_with_ids(*ids), aws)
    assert finding.level is Level.INFO
    assert finding.message.endswith("have 2 instance(s) free for an On-Demand base of 2")


def test_named_reservation_that_does_not_match_is_an_error(aws: Aws) -> None:
    rid = "cr-0123456789abcdef0"
    wrong = _reservation(
        rid, State="expired", InstanceType="p5.48xlarge", AvailabilityZone="us-east-1b", Tenancy="dedicated"
    )
    _stub(aws, ({"CapacityReservationIds": [rid]}, {"CapacityReservations": [wrong]}))
    [finding] = check_reservations(_with_ids(rid), aws)
    assert finding.level is Level.ERROR
    assert finding.message == (
        f"fleet training: reservation {rid}: state is expired, not active; type p5.48xlarge is not one of "
        "p4d.24xlarge; zone us-east-1b is not one of us-east-1a; tenancy dedicated is not default"
    )


def test_named_reservation_that_does_not_exist_is_an_error(aws: Aws) -> None:
    rid = "cr-0123456789abcdef0"
    _stub(aws, ({"CapacityReservationIds": [rid]}, "InvalidCapacityReservationId.NotFound"))
    [finding] = check_reservations(_with_ids(rid), aws)
    assert finding.level is Level.ERROR and "capacity_reservation.ids" in finding.fix


def test_open_reservations_short_of_the_base_are_a_warning(aws: Aws) -> None:
    # prod's training fleet: capacity-reservations-first without ids uses open reservations of p4d in us-east-1a.
    filters = {
        "Filters": [
            {"Name": "instance-type", "Values": ["p4d.24xlarge"]},
            {"Name": "availability-zone", "Values": ["us-east-1a"]},
            {"Name": "state", "Values": ["active"]},
        ]
    }
    found = [
        _reservation("cr-0123456789abcdef0", InstanceMatchCriteria="open", AvailableInstanceCount=1),
        _reservation("cr-0123456789abcdef1", AvailableInstanceCount=5),  # targeted: not used without its id
    ]
    _stub(aws, (filters, {"CapacityReservations": found}))
    [finding] = check_reservations(environment("prod"), aws)
    assert finding.level is Level.WARNING
    assert (
        finding.message
        == "fleet training: open matching reservations have 1 instance(s) free for an On-Demand base of 2"
    )


def _block_env():
    return fleet_changed(
        environment("prod"),
        0,
        capacity_block=CapacityBlock(id="cr-0123456789abcdef0", start=START, end=END),
        capacity_reservation=None,
        capacity=Capacity(min=2, max=2, desired=2),
        placement="none",
    )


def _block(**fields: Any) -> dict[str, Any]:
    block = {"ReservationType": "capacity-block", "State": "scheduled", "StartDate": START, "EndDate": END}
    return _reservation("cr-0123456789abcdef0", **{**block, **fields})


def test_capacity_block_scheduled_with_the_configs_window(aws: Aws) -> None:
    _stub(aws, ({"CapacityReservationIds": ["cr-0123456789abcdef0"]}, {"CapacityReservations": [_block()]}))
    [finding] = check_blocks(_block_env(), aws)
    assert finding.level is Level.INFO
    assert (
        finding.message
        == "fleet training: block cr-0123456789abcdef0 is scheduled, 2026-12-01T11:30:00Z to 2026-12-03T11:30:00Z"
    )


def test_capacity_block_with_another_window_type_or_size_is_an_error(aws: Aws) -> None:
    later = _block(
        StartDate=datetime(2026, 12, 2, 11, 30, tzinfo=UTC), InstanceType="p5.48xlarge", TotalInstanceCount=1
    )
    _stub(aws, ({"CapacityReservationIds": ["cr-0123456789abcdef0"]}, {"CapacityReservations": [later]}))
    [finding] = check_blocks(_block_env(), aws)
    assert finding.level is Level.ERROR
    assert "type p5.48xlarge is not one of p4d.24xlarge" in finding.message
    assert (
        "its window is 2026-12-02T11:30:00Z to 2026-12-03T11:30:00Z, the config's 2026-12-01T11:30:00Z"
        in finding.message
    )
    assert "it holds 1 instance(s), the fleet's max is 2" in finding.message


def test_expired_block_or_plain_reservation_is_an_error(aws: Aws) -> None:
    gone = _block(State="expired", ReservationType="default")
    _stub(aws, ({"CapacityReservationIds": ["cr-0123456789abcdef0"]}, {"CapacityReservations": [gone]}))
    [finding] = check_blocks(_block_env(), aws)
    assert finding.level is Level.ERROR
    assert "state is expired, not scheduled or active" in finding.message
    assert "is a default reservation, not a Capacity Block" in finding.message
