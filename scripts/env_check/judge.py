"""The checks: each reads what it needs through ``aws`` and judges it against the ``Expectations``.

A check is a plain function ``check(session, expectations) -> CheckResult`` (``CHECKS``), so a
pipeline step can also run them from Python, all or some. A check fails (``passed`` False) on
what it finds; it raises ``CheckError`` when it cannot look (an AWS error), never a boto error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from scripts.env_check import aws
from scripts.env_check.aws import CheckError, describe_aws_error, one_line
from scripts.env_check.expectations import Expectations, FleetExpectation

#: The only states of a stack whose last operation succeeded. UPDATE_ROLLBACK_COMPLETE
#: is stable but means the last deploy failed and was undone: a failure here.
HEALTHY_STACK_STATES = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"})

#: The data type of an SSM parameter that holds an AMI id (SSM checks the value is an available AMI, after
#: PutParameter returns: a parameter of this type that exists passed that check).
AMI_DATA_TYPE = "aws:ec2:image"


@dataclass(frozen=True)
class CheckResult:
    check: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.check}: {self.detail}"


Check = Callable[[boto3.Session, Expectations], CheckResult]


def check(name: str) -> Callable[[Callable[[boto3.Session, Expectations], tuple[bool, str]]], Check]:
    """Make ``fn`` a check named ``name``: it returns a CheckResult and raises CheckError, never a boto error."""

    def wrap(fn: Callable[[boto3.Session, Expectations], tuple[bool, str]]) -> Check:
        @functools.wraps(fn)
        def run(session: boto3.Session, expected: Expectations) -> CheckResult:
            try:
                passed, detail = fn(session, expected)
            except (ClientError, BotoCoreError) as err:
                raise CheckError(describe_aws_error(name, err)) from None
            return CheckResult(name, passed, detail)

        return run

    return wrap


@check("stacks")
def check_stacks(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """Every ``<env>-*`` stack ended its last operation well, and the stacks every environment has exist."""
    stacks = {
        s["StackName"]: s
        for s in aws.list_stacks(session)
        if expected.owns(s["StackName"], expected.stack_prefix) and s["StackStatus"] != "DELETE_COMPLETE"
    }
    problems = [f"{name} missing" for name in expected.required_stacks if name not in stacks]
    for name, stack in sorted(stacks.items()):
        if stack["StackStatus"] not in HEALTHY_STACK_STATES:
            reason = one_line(stack.get("StackStatusReason", ""))
            problems.append(f"{name} {stack['StackStatus']}" + (f" ({reason})" if reason else ""))
    if problems:
        return False, "; ".join(sorted(problems))
    return True, ", ".join(f"{name} {stack['StackStatus']}" for name, stack in sorted(stacks.items()))


def _capacity(group: Mapping[str, Any]) -> str:
    return f"min {group['MinSize']} max {group['MaxSize']} desired {group['DesiredCapacity']}"


def _fleet_problem(expected: FleetExpectation, group: Mapping[str, Any] | None) -> str | None:
    if group is None:
        return f"{expected.group} missing"
    matches = expected.allows(group["MinSize"], group["MaxSize"], group["DesiredCapacity"])
    return None if matches else f"{expected.group} {_capacity(group)}, expected {expected.describe()}"


@check("fleets")
def check_fleets(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """Each configured fleet's group exists with the configured capacity, and no group is left from a removed
    fleet (a leftover still costs money)."""
    groups = {
        g["AutoScalingGroupName"]: g
        for g in aws.list_groups(session)
        if expected.owns(g["AutoScalingGroupName"], expected.asg_prefix)
    }
    wanted = {f.group for f in expected.fleets}
    problems = [p for f in expected.fleets if (p := _fleet_problem(f, groups.get(f.group)))]
    problems += [f"{name} is not a fleet in the config" for name in sorted(groups) if name not in wanted]
    if problems:
        return False, "; ".join(problems)
    if not expected.fleets:
        return True, "no fleets configured and no groups found"
    return True, "; ".join(f"{f.group} {_capacity(groups[f.group])}" for f in expected.fleets)


@check("alarms")
def check_alarms(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """No alarm of the environment fires (INSUFFICIENT_DATA is fine: an idle fleet has no GPU metrics)."""
    alarms = [
        alarm
        for alarm in aws.list_alarms(session, expected.resource_prefix)
        if expected.owns(alarm["AlarmName"], expected.resource_prefix)
    ]
    firing = sorted(a["AlarmName"] for a in alarms if a["StateValue"] == "ALARM")
    summary = f"{len(firing)} of {len(alarms)} alarm(s) named {expected.resource_prefix}* in ALARM"
    if firing:
        return False, f"{summary}: {', '.join(firing)}"
    return True, summary


@check("ami-parameter")
def check_ami_parameter(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """The parameter the fleets launch from exists and holds an AMI id (data type aws:ec2:image, where reported)."""
    parameter = aws.get_parameter(session, expected.ami_parameter)
    if parameter is None:
        return False, (
            f"{expected.ami_parameter} missing: the fleet stack cannot resolve its AMI; fix: put the last AMI id "
            "back (docs/operations.md, Upgrading a deployed environment)"
        )
    data_type = parameter.get("DataType")
    if data_type and data_type != AMI_DATA_TYPE:
        return False, f"{expected.ami_parameter} has data type {data_type}, expected {AMI_DATA_TYPE}"
    shown = data_type or "data type not reported"
    return True, f"{expected.ami_parameter} = {parameter['Value']} ({shown})"


def _owns_file_system(expected: Expectations, file_system: Mapping[str, Any]) -> bool:
    tags = {t["Key"]: t["Value"] for t in file_system.get("Tags", [])}
    if expected.owns(tags.get("Name", ""), expected.resource_prefix):
        return True
    return all(tags.get(key) == value for key, value in expected.file_system_tags)


@check("file-systems")
def check_file_systems(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """Every FSx file system of the environment is AVAILABLE (a mount on a new node fails otherwise)."""
    ours = sorted(
        (fs for fs in aws.list_file_systems(session) if _owns_file_system(expected, fs)),
        key=lambda fs: fs["FileSystemId"],
    )
    if not ours:
        wanted = ", ".join(f"{k}={v}" for k, v in expected.file_system_tags)
        found = f"no file system tagged {wanted} or named {expected.resource_prefix}*"
        if expected.file_system_expected:
            return False, f"{found}, but the config declares storage.file_system"
        return True, found
    problems = []
    for fs in ours:
        state = fs.get("Lifecycle", "lifecycle not reported")
        if state != "AVAILABLE":
            reason = one_line(fs.get("FailureDetails", {}).get("Message", ""))
            problems.append(f"{fs['FileSystemId']} {state}" + (f" ({reason})" if reason else ""))
    if problems:
        return False, "; ".join(problems)
    return True, ", ".join(f"{fs['FileSystemId']} AVAILABLE" for fs in ours)


@check("trail")
def check_trail(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """The environment's trail records API calls and delivers them (an audit gap is a failed deploy)."""
    status = aws.get_trail_status(session, expected.trail_name)
    if status is None:
        return False, f"{expected.trail_name} missing"
    if not status.get("IsLogging"):
        return False, f"{expected.trail_name} is not logging"
    if status.get("LatestDeliveryError"):
        return False, f"{expected.trail_name} is logging but delivery fails: {status['LatestDeliveryError']}"
    return True, f"{expected.trail_name} is logging"


CHECKS: tuple[Check, ...] = (
    check_stacks,
    check_fleets,
    check_alarms,
    check_ami_parameter,
    check_file_systems,
    check_trail,
)


def run_checks(session: boto3.Session, expected: Expectations, checks: Sequence[Check] = CHECKS) -> list[CheckResult]:
    """Run ``checks`` in order; raises CheckError when one of them cannot run."""
    return [run(session, expected) for run in checks]
