#!/usr/bin/env python3
"""Verify a deployed environment through the AWS API: the pipeline's post-deploy check.

A successful ``cdk deploy`` only says CloudFormation finished; it does not say the
trail is logging, no alarm fired, or the AMI parameter the fleets launch from
exists. A pipeline stage runs this after deploying an environment, so a
promotion stops on a broken environment rather than carrying it forward:

    scripts/check_environment.py dev
    scripts/check_environment.py prod --region us-west-2 --json

The expected state comes from ``config/<env>.yaml`` (``config.load_environment``)
and the names from ``config.naming.ResourceNames`` (the AMI parameter included:
``/imagebuilder/gpu-platform/<env>/ami/latest``). The stack names are repeated here
because ResourceNames lacks them.
Each check prints ``PASS|FAIL <check>: <detail>``; the exit status is 0 when
every check passes and 1 otherwise. A problem that stops the checks from
running at all (a config error, no credentials, the wrong account, access
denied, throttling after retries) prints one line on stderr and exits 2.

The checks are plain functions ``check(session, expectations) -> CheckResult``
(``CHECKS``), so a pipeline step can also run them from Python, all or some.

The role that runs the check needs read access only: sts:GetCallerIdentity,
cloudformation:DescribeStacks, autoscaling:DescribeAutoScalingGroups,
cloudwatch:DescribeAlarms, ssm:GetParameter, fsx:DescribeFileSystems,
cloudtrail:GetTrailStatus.

Fleets: ``fleet_expectations`` reads ``env.fleets`` (each fleet's ``name``,
``capacity.min/max/desired``, ``scaling`` and ``capacity_block``) and expects one
Auto Scaling group per fleet named ``ResourceNames.asg_name_prefix + fleet.name``,
with the sizes the fleet can have between two deploys: the configured min and max
or those of one of its scheduled actions (a Capacity Block fleet: 0 outside its
window, its size inside), and the configured desired capacity only where nothing
moves it (no scaling policy, no schedule, no block); otherwise any desired
capacity between min and max. A group with the prefix that is no configured fleet
is a failure (a leftover of a removed fleet still costs money). Where the schema
has no ``fleets`` (older configs), the check reports the groups it sees and
expects nothing.

File systems are found by tags (``Environment`` and ``Project``, which the stacks
propagate) or by a Name tag with the environment's prefix; where the config
declares ``storage.file_system``, finding none is a failure.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    ProfileNotFound,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a file, the script still finds the config package

from config import ConfigError, Environment, available_environments, load_environment  # noqa: E402
from config.loader import CONFIG_DIR  # noqa: E402
from config.naming import ResourceNames  # noqa: E402

#: The stacks every environment has (stacks/platform_stage.py); other ``<env>-*`` stacks are checked when present.
REQUIRED_STACKS = ("Security", "Network", "Storage", "Image", "Fleets", "Monitoring")
#: The stack PlatformStage adds when the config has a ``storage`` section.

#: The only states of a stack whose last operation succeeded. UPDATE_ROLLBACK_COMPLETE
#: is stable but means the last deploy failed and was undone: a failure here.
HEALTHY_STACK_STATES = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"})

AMI_DATA_TYPE = "aws:ec2:image"

#: Standard retry mode backs off on throttling; what is still throttled after it is an error (exit 2).
_RETRIES = Config(retries={"mode": "standard", "max_attempts": 6})
_THROTTLING = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "RequestThrottled"}
)
_ACCESS_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
_BAD_CREDENTIALS = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException"}
)


class CheckError(Exception):
    """The checks cannot run (or cannot finish); its text is the one line printed."""


class FleetCapacity(Protocol):
    min: int
    max: int
    desired: int | None


class FleetConfig(Protocol):
    """What the check needs of a fleet in the config (``config.fleets.Fleet`` provides it; ``scaling``
    and ``capacity_block`` are read where present)."""

    name: str
    capacity: FleetCapacity


@dataclass(frozen=True)
class FleetExpectation:
    """The capacity one fleet's Auto Scaling group may have between two deploys.

    ``min_size``/``max_size`` as deployed, or as one of ``scheduled`` sets them (``(min, max)`` of
    a scheduled action; None where the action leaves that bound alone); ``desired`` None: any
    value between the group's min and max (scaling policies and schedules move it).
    """

    group: str
    min_size: int
    max_size: int
    desired: int | None = None
    scheduled: tuple[tuple[int | None, int | None], ...] = ()

    def allows(self, min_size: int, max_size: int, desired: int) -> bool:
        mins = {self.min_size, *(lo for lo, _ in self.scheduled if lo is not None)}
        maxes = {self.max_size, *(hi for _, hi in self.scheduled if hi is not None)}
        in_bounds = min_size <= desired <= max_size if self.desired is None else desired == self.desired
        return min_size in mins and max_size in maxes and in_bounds

    def describe(self) -> str:
        text = f"min {self.min_size} max {self.max_size}"
        if self.desired is not None:
            text += f" desired {self.desired}"
        for lo, hi in self.scheduled:
            text += (
                " or scheduled" + (f" min {lo}" if lo is not None else "") + (f" max {hi}" if hi is not None else "")
            )
        return text


@dataclass(frozen=True)
class Expectations:
    """What a healthy deployment of one environment looks like, in AWS names."""

    environment: str
    account: str
    region: str
    stack_prefix: str
    required_stacks: tuple[str, ...]
    asg_prefix: str
    #: None: the config does not describe fleets (yet), so no group is expected or unexpected.
    fleets: tuple[FleetExpectation, ...] | None
    #: ``ResourceNames.prefix`` and a dash: the start of alarm names and file system Name tags.
    resource_prefix: str
    ami_parameter: str
    #: An FSx file system is the environment's when it carries all these tags, or a Name tag with ``resource_prefix``.
    file_system_tags: tuple[tuple[str, str], ...]
    #: True when the config declares a file system (``storage.file_system``): finding none is then a failure.
    file_system_expected: bool
    trail_name: str
    #: Prefixes of environments whose names extend this one's (``dev-2`` for ``dev``): their resources are not ours.
    foreign_prefixes: tuple[str, ...] = ()

    def owns(self, name: str, prefix: str) -> bool:
        return name.startswith(prefix) and not name.startswith(self.foreign_prefixes)


@dataclass(frozen=True)
class CheckResult:
    check: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.check}: {self.detail}"


Check = Callable[[boto3.Session, Expectations], CheckResult]


# --- expectations -------------------------------------------------------------------------------------------


def fleet_expectations(env: Any, names: ResourceNames) -> tuple[FleetExpectation, ...] | None:
    """Expectations from ``env.fleets`` (see ``FleetConfig``); None where the schema has no fleets section.

    A fleet's group is ``ResourceNames.asg_name_prefix + fleet.name``: the fleet stack must name it so.
    """
    fleets: Iterable[FleetConfig] | None = getattr(env, "fleets", None)
    if fleets is None:
        return None
    return tuple(_fleet_expectation(f"{names.asg_name_prefix}{fleet.name}", fleet) for fleet in fleets)


def _fleet_expectation(group: str, fleet: FleetConfig) -> FleetExpectation:
    capacity = fleet.capacity
    if getattr(fleet, "capacity_block", None) is not None:
        # Empty outside the block's window; its scheduled actions size it to max for the window.
        return FleetExpectation(group, 0, 0, scheduled=((capacity.max, capacity.max),))
    scaling = getattr(fleet, "scaling", None)
    schedules = tuple(getattr(scaling, "schedules", None) or ())
    moved = schedules or getattr(scaling, "target_tracking", None) or getattr(scaling, "step", None)
    return FleetExpectation(
        group,
        capacity.min,
        capacity.max,
        desired=None if moved else capacity.desired,
        scheduled=tuple((action.min, action.max) for action in schedules),
    )


def _storage_file_system(env: Any) -> Any:
    """``env.storage.file_system``, or None where the config (or the schema) has none."""
    return getattr(getattr(env, "storage", None), "file_system", None)


def required_stacks(env: Any) -> tuple[str, ...]:
    """Stack names (without ``<env>-``) that every environment has (stacks/platform_stage.py)."""
    return REQUIRED_STACKS


def expectations_for(
    env: Environment, *, region: str | None = None, other_environments: Iterable[str] = ()
) -> Expectations:
    """Everything the checks compare against, from the environment's config and the shared names."""
    names = ResourceNames.of(env)
    if region:
        names = replace(names, region=region)
    foreign: list[str] = []
    for other in other_environments:
        if other != env.name and other.startswith(f"{env.name}-"):
            other_names = replace(names, env=other)
            foreign += [f"{other}-", other_names.asg_name_prefix]
    tags = {"Environment": env.name}
    if env.tags.get("Project"):
        tags["Project"] = env.tags["Project"]
    return Expectations(
        environment=env.name,
        account=env.account,
        region=names.region,
        stack_prefix=f"{env.name}-",
        required_stacks=tuple(f"{env.name}-{stack}" for stack in required_stacks(env)),
        asg_prefix=names.asg_name_prefix,
        fleets=fleet_expectations(env, names),
        resource_prefix=f"{names.prefix}-",
        ami_parameter=names.ami_parameter,
        file_system_tags=tuple(sorted(tags.items())),
        file_system_expected=_storage_file_system(env) is not None,
        trail_name=names.trail_name,
        foreign_prefixes=tuple(foreign),
    )


# --- AWS errors -----------------------------------------------------------------------------------------------


def describe_aws_error(what: str, err: Exception) -> str:
    """One line for an AWS error that stops a check: what failed, why, and what to do."""
    if isinstance(err, NoCredentialsError):
        return f"{what}: no AWS credentials found; fix: configure credentials (AWS_PROFILE, environment variables or a role)"
    if isinstance(err, ProfileNotFound):
        return f"{what}: {err}; fix: set AWS_PROFILE to a profile of ~/.aws/config, or unset it"
    if isinstance(err, HTTPClientError | EndpointConnectionError):
        return f"{what}: {err}; fix: check network access to AWS and the region"
    if not isinstance(err, ClientError):
        return f"{what}: {err}; fix: check the AWS credentials and configuration"
    code = err.response.get("Error", {}).get("Code", "Unknown")
    message = _one_line(err.response.get("Error", {}).get("Message", ""))
    call = f"{err.operation_name} failed ({code}: {message})" if message else f"{err.operation_name} failed ({code})"
    if code in _THROTTLING:
        return f"{what}: {call} after retries; fix: run the check again in a few minutes"
    if code in _ACCESS_DENIED:
        return f"{what}: {call}; fix: give the role that runs the check read access (listed in scripts/check_environment.py)"
    if code in _BAD_CREDENTIALS:
        return f"{what}: {call}; fix: refresh the AWS credentials"
    return f"{what}: {call}; fix: correct what AWS reports, then run the check again"


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


def _client(session: boto3.Session, service: str) -> Any:
    return session.client(service, config=_RETRIES)


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    return [item for page in client.get_paginator(operation).paginate(**kwargs) for item in page.get(key, [])]


def _one_line(text: str) -> str:
    """AWS reasons may span lines; a report line must not."""
    return " ".join(str(text).split())


def _error_code(err: ClientError) -> str:
    return err.response.get("Error", {}).get("Code", "")


# --- the checks -----------------------------------------------------------------------------------------------


@check("stacks")
def check_stacks(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """Every ``<env>-*`` stack ended its last operation well, and the stacks every environment has exist."""
    stacks = {
        s["StackName"]: s
        for s in _pages(_client(session, "cloudformation"), "describe_stacks", "Stacks")
        if expected.owns(s["StackName"], expected.stack_prefix) and s["StackStatus"] != "DELETE_COMPLETE"
    }
    problems = [f"{name} missing" for name in expected.required_stacks if name not in stacks]
    for name, stack in sorted(stacks.items()):
        if stack["StackStatus"] not in HEALTHY_STACK_STATES:
            reason = _one_line(stack.get("StackStatusReason", ""))
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
    """Each configured fleet's group exists with the configured capacity, and no group is left from a removed fleet."""
    groups = {
        g["AutoScalingGroupName"]: g
        for g in _pages(_client(session, "autoscaling"), "describe_auto_scaling_groups", "AutoScalingGroups")
        if expected.owns(g["AutoScalingGroupName"], expected.asg_prefix)
    }
    if expected.fleets is None:
        return True, f"no fleets in the config; {len(groups)} group(s) named {expected.asg_prefix}* not checked"
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
    pages = (
        _client(session, "cloudwatch")
        .get_paginator("describe_alarms")
        .paginate(AlarmNamePrefix=expected.resource_prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"])
    )
    alarms = [
        alarm
        for page in pages
        for key in ("MetricAlarms", "CompositeAlarms")
        for alarm in page.get(key, [])
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
    try:
        parameter = _client(session, "ssm").get_parameter(Name=expected.ami_parameter)["Parameter"]
    except ClientError as err:
        if _error_code(err) == "ParameterNotFound":
            return False, f"{expected.ami_parameter} missing"
        raise
    data_type = parameter.get("DataType")
    if data_type and data_type != AMI_DATA_TYPE:
        return False, f"{expected.ami_parameter} has data type {data_type}, expected {AMI_DATA_TYPE}"
    shown = data_type or "data type not reported"
    return True, f"{expected.ami_parameter} = {parameter['Value']} ({shown})"


def list_file_systems(session: boto3.Session) -> list[dict[str, Any]]:
    """All FSx file systems of the region (its own function: moto reports no Lifecycle, so tests stub this call)."""
    return _pages(_client(session, "fsx"), "describe_file_systems", "FileSystems")


def _owns_file_system(expected: Expectations, file_system: Mapping[str, Any]) -> bool:
    tags = {t["Key"]: t["Value"] for t in file_system.get("Tags", [])}
    if expected.owns(tags.get("Name", ""), expected.resource_prefix):
        return True
    return all(tags.get(key) == value for key, value in expected.file_system_tags)


@check("file-systems")
def check_file_systems(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """Every FSx file system of the environment is AVAILABLE (a mount on a new node fails otherwise)."""
    ours = sorted(
        (fs for fs in list_file_systems(session) if _owns_file_system(expected, fs)), key=lambda fs: fs["FileSystemId"]
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
            reason = _one_line(fs.get("FailureDetails", {}).get("Message", ""))
            problems.append(f"{fs['FileSystemId']} {state}" + (f" ({reason})" if reason else ""))
    if problems:
        return False, "; ".join(problems)
    return True, ", ".join(f"{fs['FileSystemId']} AVAILABLE" for fs in ours)


@check("trail")
def check_trail(session: boto3.Session, expected: Expectations) -> tuple[bool, str]:
    """The environment's trail records API calls and delivers them (an audit gap is a failed deploy)."""
    try:
        status = _client(session, "cloudtrail").get_trail_status(Name=expected.trail_name)
    except ClientError as err:
        if _error_code(err) == "TrailNotFoundException":
            return False, f"{expected.trail_name} missing"
        raise
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


# --- running --------------------------------------------------------------------------------------------------


def open_session(region: str) -> boto3.Session:
    """A session on the usual credential chain; a broken profile is a one-line error, not a traceback."""
    try:
        return boto3.Session(region_name=region)
    except BotoCoreError as err:
        raise CheckError(describe_aws_error("credentials", err)) from None


def verify_account(session: boto3.Session, expected: Expectations) -> None:
    """Refuse credentials for another account: every check would fail, for the wrong reason."""
    try:
        if session.get_credentials() is None:
            raise NoCredentialsError()
        account = _client(session, "sts").get_caller_identity()["Account"]
    except (ClientError, BotoCoreError) as err:
        raise CheckError(describe_aws_error("credentials", err)) from None
    if account != expected.account:
        raise CheckError(
            f"credentials: they are for account {account}, but {expected.environment} is deployed to "
            f"{expected.account}; fix: use credentials for account {expected.account}"
        )


def run_checks(session: boto3.Session, expected: Expectations, checks: Sequence[Check] = CHECKS) -> list[CheckResult]:
    """Run ``checks`` in order; raises CheckError when one of them cannot run."""
    return [run(session, expected) for run in checks]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env", help="environment name (config/<env>.yaml)")
    parser.add_argument("--region", help="region to check (default: the environment's region)")
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR, help="folder of environment files")
    parser.add_argument("--json", action="store_true", help="print a machine-readable report")
    return parser.parse_args(argv)


def _report(expected: Expectations, results: Sequence[CheckResult], as_json: bool) -> None:
    if not as_json:
        for result in results:
            print(result.line())
        return
    report = {
        "environment": expected.environment,
        "account": expected.account,
        "region": expected.region,
        "passed": all(r.passed for r in results),
        "checks": [asdict(r) for r in results],
    }
    print(json.dumps(report, indent=2))


def _fail(lines: Sequence[str], env: str, as_json: bool) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    if as_json:
        print(json.dumps({"environment": env, "passed": False, "error": "\n".join(lines)}, indent=2))
    return 2


def main(argv: Sequence[str] | None = None, *, session: boto3.Session | None = None) -> int:
    """Exit status: 0 all checks pass, 1 some check fails, 2 the checks could not run."""
    args = parse_args(argv)
    try:
        env = load_environment(args.env, args.config_dir)
        expected = expectations_for(env, region=args.region, other_environments=available_environments(args.config_dir))
        session = session or open_session(expected.region)
        verify_account(session, expected)
        results = run_checks(session, expected)
    except ConfigError as err:
        return _fail(err.lines, args.env, args.json)
    except CheckError as err:
        return _fail([f"error: {err}"], args.env, args.json)
    _report(expected, results, args.json)
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
