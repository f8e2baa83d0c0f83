"""``gpu-platform status --env E``: the state of a deployed environment, as tables or one JSON document.

Exit codes: 0 nothing needs a person, 1 findings (an ERROR: a missing group, an unhealthy node, an alarm
in ALARM), 2 a config error, credentials of another account than the config's, or AWS could not be read
(one line on stderr, never a traceback).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from rich import box
from rich.console import Console
from rich.table import Table

from config.errors import ConfigError
from config.loader import CONFIG_DIR, display_path, load_environment
from ops.findings import exit_code
from ops.status import NOTICE_PREFIX, EnvironmentStatus, InstanceStatus, collect

NO_CREDENTIALS = (
    "no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
    "(the shipped configs use placeholder account ids: set yours in config/<env>.yaml)"
)


def aws_error_line(err: Exception) -> str:
    """One line for an AWS error that stops the command."""
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return NO_CREDENTIALS
    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        message = " ".join(str(error.get("Message", "")).split())
        return (
            f"AWS: {err.operation_name} failed ({error.get('Code', 'Unknown')}: {message}); "
            "fix: use credentials of the environment's account that may read Auto Scaling, EC2, SSM and CloudWatch"
        )
    return f"AWS: {' '.join(str(err).split())}; fix: check the credentials, the network and the region"


def status_command(env: str, json_out: bool, config_dir: Path | None = None, session: Any = None) -> int:
    """Print the environment's status; the exit code as in the module docstring."""
    try:
        environment = load_environment(env, config_dir or CONFIG_DIR)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    try:
        session = session or boto3.session.Session(region_name=environment.region)
        account = session.client("sts").get_caller_identity()["Account"]
        if account != environment.account:
            print(
                f"{display_path((config_dir or CONFIG_DIR) / f'{env}.yaml')}: account: the credentials are for "
                f"account {account}, not {environment.account}; fix: use credentials of account {environment.account} "
                "(or set your account id in the config)",
                file=sys.stderr,
            )
            return 2
        status = collect(environment, session)
    except (BotoCoreError, ClientError) as err:
        print(aws_error_line(err), file=sys.stderr)
        return 2
    if json_out:
        print(json.dumps(as_json(status), indent=2, sort_keys=True))
    else:
        render(status, Console())
    return exit_code(status.findings)


def as_json(status: EnvironmentStatus) -> dict[str, Any]:
    document = asdict(status)
    document["findings"] = [{**asdict(f), "level": f.level.value} for f in status.findings]
    return document


def _uptime(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    days, rest = divmod(seconds, 86400)
    return f"{days}d {rest // 3600}h" if days else f"{rest // 3600}h {rest % 3600 // 60}m"


def _percent(value: float | None) -> str:
    return "no data" if value is None else f"{value:g} %"


def _instances_table(fleet: str, instances: list[InstanceStatus]) -> Table:
    """One row per instance. AMI: ``latest`` when it is the parameter's value (printed above), ``old`` when not
    (its id is in the finding); state: the lifecycle state, with the health when not Healthy."""
    table = Table(title=f"{fleet}: instances", box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in ("instance", "type", "market", "zone", "state", "AMI", "uptime", "Spot notice"):
        table.add_column(column, no_wrap=True)
    for i in instances:
        ami = {True: "latest", False: "old", None: "?"}[i.ami_is_latest]
        market = i.market + (f" {i.capacity_reservation}" if i.capacity_reservation else "")
        state = i.lifecycle_state + ("" if i.health == "Healthy" else f", {i.health}")
        notice = i.interruption.removeprefix(NOTICE_PREFIX) if i.interruption else "-"  # terminate, stop
        table.add_row(i.instance_id, i.instance_type, market, i.zone, state, ami, _uptime(i.uptime_s), notice)
    return table


def render(status: EnvironmentStatus, console: Console) -> None:
    console.print(f"[bold]{status.environment}[/bold] ({status.account}, {status.region})")
    # Long lines stay whole (soft wrap) so that a URL or an id can be copied from the terminal.
    console.print(f"dashboard: {status.dashboard_url}", soft_wrap=True)
    console.print(f"AMI parameter {status.ami_parameter}: {status.latest_ami or 'not found'}", soft_wrap=True)
    fleets = Table(title="fleets", box=box.SIMPLE_HEAD)
    for column in ("fleet", "group", "min/desired/max", "in service", "pending", "GPU util 15 min (avg/max)"):
        fleets.add_column(column)
    for f in status.fleets:
        if not f.deployed:
            fleets.add_row(f.name, f.group_name, "not deployed", "-", "-", "-")
            continue
        utilization = f"{_percent(f.gpu_utilization_avg)} / {_percent(f.gpu_utilization_max)}"
        fleets.add_row(
            f.name, f.group_name, f"{f.minimum}/{f.desired}/{f.maximum}", str(f.in_service), str(f.pending), utilization
        )
    console.print(fleets)
    for f in status.fleets:
        if f.instances:
            console.print(_instances_table(f.name, f.instances))
    console.print(f"alarms in ALARM: {len(status.alarms)}")
    for alarm in status.alarms:
        console.print(f"  {alarm.name}: {alarm.reason}", soft_wrap=True, markup=False)
    for finding in status.findings:
        fix = f"; fix: {finding.fix}" if finding.fix else ""
        console.print(
            f"{finding.level.value} {finding.check}: {finding.message}{fix}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
