"""``gpu-platform cost --env E [--live] [--json]``."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
from rich.console import Console

from config.loader import CONFIG_DIR, load_environment
from ops.cost import live, report
from ops.cost.prices import PRICES_PATH, load_prices


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
    prices = load_prices(environment.region, prices_path)
    notes: list[str] = []
    if live_prices:
        client = ec2 or boto3.session.Session(region_name=environment.region).client("ec2")
        notes = live.refresh(prices, environment, client)
    # The assembly synthesized from this config folder: <checkout>/cdk.out beside config/.
    assembly = (cdk_out or config_dir.parent / "cdk.out") / f"assembly-{environment.name}"
    result = report.estimate(environment, prices, assembly, notes)
    if json_out:
        print(json.dumps(result, indent=2))
    else:
        console = Console()
        if not console.is_terminal:
            console = Console(width=120)  # a file or pipe gets the whole table, not 80 columns
        report.render(result, console)
    return 0
