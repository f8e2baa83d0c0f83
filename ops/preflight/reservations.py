"""Reserved capacity the fleets launch into: On-Demand Capacity Reservations and Capacity Blocks for ML."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from config.fleets import Fleet
from config.fleets.capacity import CapacityBlock, ReservationPreference
from config.schema import Environment
from ops.findings import Finding, Level
from ops.preflight.aws import Aws, error_code

#: What the launch templates launch: Linux on shared hardware.
PLATFORM = "Linux/UNIX"
TENANCY = "default"
#: Capacity Block states a fleet can still use, and those that need the payment to clear first.
_BLOCK_USABLE = {"scheduled", "active"}
_BLOCK_PENDING = {"payment-pending", "pending"}


def _describe(aws: Aws, ids: list[str]) -> tuple[dict[str, dict[str, Any]], str]:
    """Reservations by id, and AWS's message when one of ``ids`` does not exist (no id then is returned)."""
    try:
        found = aws.pages("ec2", "describe_capacity_reservations", "CapacityReservations", CapacityReservationIds=ids)
    except ClientError as err:
        if not error_code(err).startswith("InvalidCapacityReservationId"):
            raise
        return {}, " ".join(err.response.get("Error", {}).get("Message", "").split())
    return {r["CapacityReservationId"]: r for r in found}, ""


def _mismatches(fleet: Fleet, r: dict[str, Any]) -> list[str]:
    problems = []
    if r.get("InstanceType") not in fleet.instance_types:
        problems.append(f"type {r.get('InstanceType')} is not one of {', '.join(fleet.instance_types)}")
    if r.get("AvailabilityZone") not in fleet.availability_zones:
        problems.append(f"zone {r.get('AvailabilityZone')} is not one of {', '.join(fleet.availability_zones)}")
    if r.get("InstancePlatform", PLATFORM) != PLATFORM:
        problems.append(f"platform {r.get('InstancePlatform')} is not {PLATFORM}")
    if r.get("Tenancy", TENANCY) != TENANCY:
        problems.append(f"tenancy {r.get('Tenancy')} is not {TENANCY}")
    return problems


def _named_reservations(fleet: Fleet, aws: Aws) -> tuple[list[Finding], int]:
    """Findings on the fleet's listed ids, and the instances still free in the usable ones."""
    reservation = fleet.capacity_reservation
    assert reservation is not None  # callers pass only fleets with a reservation
    ids = list(reservation.ids)
    found, missing = _describe(aws, ids)
    if missing:
        fix = f"correct fleets[{fleet.name}].capacity_reservation.ids (aws ec2 describe-capacity-reservations)"
        return [Finding("capacity-reservations", Level.ERROR, f"fleet {fleet.name}: {missing}", fix)], 0
    findings, available = [], 0
    for rid in ids:
        r = found[rid]
        problems = _mismatches(fleet, r)
        if r.get("State") != "active":
            problems.insert(0, f"state is {r.get('State')}, not active")
        if problems:
            findings.append(
                Finding(
                    "capacity-reservations",
                    Level.ERROR,
                    f"fleet {fleet.name}: reservation {rid}: {'; '.join(problems)}",
                    f"use a reservation that matches the fleet, or remove {rid} from its capacity_reservation.ids",
                )
            )
        else:
            available += int(r.get("AvailableInstanceCount", 0))
    return findings, available


def _open_reservations(fleet: Fleet, aws: Aws) -> int:
    """Instances free in the account's active, open reservations that match the fleet (capacity-reservations-first
    without targets launches into those)."""
    found = aws.pages(
        "ec2",
        "describe_capacity_reservations",
        "CapacityReservations",
        Filters=[
            {"Name": "instance-type", "Values": list(fleet.instance_types)},
            {"Name": "availability-zone", "Values": list(fleet.availability_zones)},
            {"Name": "state", "Values": ["active"]},
        ],
    )
    return sum(
        int(r.get("AvailableInstanceCount", 0))
        for r in found
        if r.get("InstanceMatchCriteria") == "open" and not _mismatches(fleet, r)
    )


def check_reservations(env: Environment, aws: Aws) -> list[Finding]:
    """Each named On-Demand Capacity Reservation exists, is active and matches the fleet; the free instances
    of the reservations a fleet uses cover its On-Demand base (else the base launches unreserved)."""
    findings = []
    for fleet in env.fleets:
        spec = fleet.capacity_reservation
        if spec is None or spec.preference in (ReservationPreference.NONE, ReservationPreference.DEFAULT):
            continue
        if spec.resource_group_arns:
            findings.append(
                Finding(
                    "capacity-reservations",
                    Level.INFO,
                    f"fleet {fleet.name}: targets reservations through resource groups; their members are not checked",
                )
            )
            continue
        if spec.ids:
            found, available = _named_reservations(fleet, aws)
            findings += found
            if found:
                continue
            what = f"reservations {', '.join(spec.ids)}"
        else:
            available, what = _open_reservations(fleet, aws), "open matching reservations"
        base = fleet.on_demand_base_capacity
        if available < base:
            findings.append(
                Finding(
                    "capacity-reservations",
                    Level.WARNING,
                    f"fleet {fleet.name}: {what} have {available} instance(s) free for an On-Demand base of {base}",
                    "add capacity to the reservations (or lower on_demand_base_capacity); the rest launches as plain "
                    "On-Demand, without reserved capacity",
                )
            )
        else:
            findings.append(
                Finding(
                    "capacity-reservations",
                    Level.INFO,
                    f"fleet {fleet.name}: {what} have {available} instance(s) free for an On-Demand base of {base}",
                )
            )
    return findings


def check_blocks(env: Environment, aws: Aws) -> list[Finding]:
    """Each Capacity Block exists, is scheduled or active, matches the fleet's type and zone, holds the
    fleet's size, and has the config's window."""
    findings = []
    for fleet in (f for f in env.fleets if f.capacity_block is not None):
        block = fleet.capacity_block
        assert block is not None  # narrowed by the loop's filter
        found, missing = _describe(aws, [block.id])
        r = found.get(block.id)
        if r is None:
            findings.append(
                Finding(
                    "capacity-blocks",
                    Level.ERROR,
                    f"fleet {fleet.name}: {missing or block.id + ' not found'}",
                    f"correct fleets[{fleet.name}].capacity_block.id (aws ec2 describe-capacity-reservations)",
                )
            )
            continue
        findings.append(_block_finding(fleet, block, r))
    return findings


def _block_finding(fleet: Fleet, block: CapacityBlock, r: dict[str, Any]) -> Finding:
    """What EC2's reservation ``r`` of the fleet's ``block`` says: an ERROR listing what differs from the
    config, a WARNING while its payment is pending, else an INFO with its state and window."""
    problems = _block_problems(fleet, block, r)
    if problems:
        return Finding(
            "capacity-blocks",
            Level.ERROR,
            f"fleet {fleet.name}: block {block.id}: {'; '.join(problems)}",
            f"copy the block's type, zone, size, start and end into fleets[{fleet.name}] from EC2",
        )
    if r.get("State") in _BLOCK_PENDING:
        return Finding(
            "capacity-blocks",
            Level.WARNING,
            f"fleet {fleet.name}: block {block.id} is {r.get('State')}",
            "wait for the purchase to complete (state scheduled), then preflight again",
        )
    start, end = r.get("StartDate"), r.get("EndDate")
    return Finding(
        "capacity-blocks",
        Level.INFO,
        f"fleet {fleet.name}: block {block.id} is {r.get('State')}, {_iso(start)} to {_iso(end)}",
    )


def _block_problems(fleet: Fleet, block: CapacityBlock, r: dict[str, Any]) -> list[str]:
    """How the reservation ``r`` differs from the fleet and its block: kind, state, type, zone, window, size."""
    problems = [p for p in _mismatches(fleet, r) if not p.startswith(("platform", "tenancy"))]
    if r.get("ReservationType") != "capacity-block":
        problems.insert(0, f"{block.id} is a {r.get('ReservationType', 'default')} reservation, not a Capacity Block")
    if r.get("State") not in _BLOCK_USABLE | _BLOCK_PENDING:
        problems.insert(0, f"state is {r.get('State')}, not scheduled or active")
    start, end = r.get("StartDate"), r.get("EndDate")
    if start != block.start or end != block.end:
        problems.append(
            f"its window is {_iso(start)} to {_iso(end)}, the config's {_iso(block.start)} to {_iso(block.end)}"
        )
    if int(r.get("TotalInstanceCount", 0)) < fleet.capacity.max:
        problems.append(f"it holds {r.get('TotalInstanceCount')} instance(s), the fleet's max is {fleet.capacity.max}")
    return problems


def _iso(value: Any) -> str:
    return value.isoformat().replace("+00:00", "Z") if hasattr(value, "isoformat") else str(value)
