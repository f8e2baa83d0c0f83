"""Can each fleet launch where it is told to: its types offered in its zones, EFA where it uses it."""

from __future__ import annotations

from botocore.exceptions import ClientError

from config.schema import Environment
from ops.findings import Finding, Level
from ops.preflight.aws import Aws, error_code


def check_offerings(env: Environment, aws: Aws) -> list[Finding]:
    """Each fleet's instance types are offered in each of its zones (DescribeInstanceTypeOfferings).

    A zone that offers none of the fleet's types is an ERROR (the group cannot launch there);
    one that lacks some is a WARNING (the group launches the others there)."""
    findings = []
    for fleet in env.fleets:
        found: list[Finding] = []
        offered = {
            (o["InstanceType"], o["Location"])
            for o in aws.pages(
                "ec2",
                "describe_instance_type_offerings",
                "InstanceTypeOfferings",
                LocationType="availability-zone",
                Filters=[
                    {"Name": "instance-type", "Values": list(fleet.instance_types)},
                    {"Name": "location", "Values": list(fleet.availability_zones)},
                ],
            )
        }
        for zone in fleet.availability_zones:
            missing = [t for t in fleet.instance_types if (t, zone) not in offered]
            if len(missing) == len(fleet.instance_types):
                found.append(
                    Finding(
                        "instance-offerings",
                        Level.ERROR,
                        f"fleet {fleet.name}: {zone} offers none of {', '.join(fleet.instance_types)}",
                        f"remove {zone} from fleets[{fleet.name}].availability_zones or add a type offered there",
                    )
                )
            elif missing:
                found.append(
                    Finding(
                        "instance-offerings",
                        Level.WARNING,
                        f"fleet {fleet.name}: {zone} does not offer {', '.join(missing)} (the group launches the others there)",
                        f"replace {', '.join(missing)} in fleets[{fleet.name}].instance_types, or suppress this check",
                    )
                )
        findings += found or [
            Finding(
                "instance-offerings",
                Level.INFO,
                f"fleet {fleet.name}: {', '.join(fleet.instance_types)} offered in {', '.join(fleet.availability_zones)}",
            )
        ]
    return findings


def check_efa(env: Environment, aws: Aws) -> list[Finding]:
    """Every type of an EFA fleet supports EFA in this region (DescribeInstanceTypes NetworkInfo.EfaSupported)."""
    findings = []
    for fleet in (f for f in env.fleets if f.efa):
        try:
            described = {
                t["InstanceType"]: t
                for t in aws.pages(
                    "ec2", "describe_instance_types", "InstanceTypes", InstanceTypes=list(fleet.instance_types)
                )
            }
        except ClientError as err:
            if error_code(err) != "InvalidInstanceType":
                raise
            described = {}
        for name in fleet.instance_types:
            info = described.get(name)
            if info is None:
                findings.append(
                    Finding(
                        "efa-support",
                        Level.ERROR,
                        f"fleet {fleet.name}: {name} is not available in {env.region}",
                        f"use a type {env.region} offers, or refresh the catalog (scripts/refresh_instance_catalog.py)",
                    )
                )
            elif not info.get("NetworkInfo", {}).get("EfaSupported", False):
                findings.append(
                    Finding(
                        "efa-support",
                        Level.ERROR,
                        f"fleet {fleet.name}: {name} does not support EFA",
                        f"use an EFA type for fleets[{fleet.name}] or set efa: false",
                    )
                )
            else:
                findings.append(Finding("efa-support", Level.INFO, f"fleet {fleet.name}: {name} supports EFA"))
    return findings
