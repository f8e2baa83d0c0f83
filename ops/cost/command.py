"""``gpu-platform cost --env E [--live] [--json]``."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
from rich.console import Console

from config.errors import ConfigError
from config.loader import CONFIG_DIR, display_path, load_environment
from ops.cost import live, report
from ops.cost.prices import PRICES_PATH, check_region, load_prices
from ops.cost.render import render
from ops.cost.schedule import ScheduleError, monthly_usage
from ops.cost.slurm import cpu_types


def cost_command(
    env: str,
    json_out: bool,
    live_prices: bool = False,
    config_dir: Path = CONFIG_DIR,
    cdk_out: Path | None = None,
    prices_path: Path = PRICES_PATH,
    ec2: object | None = None,
) -> int:
    """Print the environment's cost; 0, or a ``ConfigError`` / botocore error for the caller to turn into exit 2."""
    environment = load_environment(env, config_dir)
    shown = display_path(config_dir / f"{env}.yaml")
    prices = load_prices(environment.region, prices_path)
    types = sorted({f.instance_types[0] for f in environment.fleets})
    spot = any(f.uses_spot for f in environment.fleets)
    check_region(prices, types, spot, cpu_types(environment))  # before --live calls anything
    try:
        usage = {f.name: monthly_usage(f) for f in environment.fleets}
    except ScheduleError as err:
        raise ConfigError([f"{shown}: {err}"]) from None
    notes: list[str] = []
    if live_prices:
        client = ec2 or boto3.session.Session(region_name=environment.region).client("ec2")
        notes = live.refresh(prices, environment, client)
    # The assembly synthesized from this config folder: <checkout>/cdk.out beside config/.
    assembly = (cdk_out or config_dir.parent / "cdk.out") / f"assembly-{environment.name}"
    result = report.estimate(environment, prices, assembly, notes, usage)
    if json_out:
        print(json.dumps(result, indent=2))
    else:
        console = Console()
        if not console.is_terminal:
            console = Console(width=120)  # a file or pipe gets the whole table, not 80 columns
        render(result, console)
    return 0
