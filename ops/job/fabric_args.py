"""``job fabric-test``'s arguments checked before it looks for credentials (``ops.args``).

The fabric check itself lives in ``ops/fabric``; this wraps its Typer command where ``job`` registers it, so
that a size the benchmark cannot read (``--max-bytes 1X``), a message larger than the fleet's GPUs can hold
twice, or a wait that is not a positive number of seconds is one line and exit 2 before any AWS call. The
wrapper keeps the command's signature (Typer reads its options through ``functools.wraps``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from config.catalog import CatalogError, get_instance_type
from config.errors import ConfigError
from config.loader import CONFIG_DIR, load_environment
from ops import args
from ops.args import ArgumentError


def check_fabric_arguments(env: str, fleet: str, max_bytes: str, timeout: float, config_dir: Path) -> None:
    """``ArgumentError`` for the first argument the benchmark would refuse. The GPU memory check needs the
    fleet; where the config or the fleet is wrong the fabric check's own message says so."""
    size = args.byte_size(max_bytes)
    args.seconds(timeout)
    try:
        spec = next((f for f in load_environment(env, config_dir).fleets if f.name == fleet), None)
        types = [get_instance_type(t) for t in spec.instance_types] if spec is not None else []
    except (ConfigError, CatalogError, ValueError):
        return
    if types:
        smallest = min(types, key=lambda t: t.gpu_memory_gib)
        args.gpu_buffers(size, smallest.gpu_memory_gib, smallest.instance_type)


def checked(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` (the fabric check's Typer function) with its arguments checked first."""

    @functools.wraps(command)
    def run(**options: Any) -> Any:
        try:
            check_fabric_arguments(
                options["env"],
                options["fleet"],
                options.get("max_bytes", "1G"),
                options.get("timeout", 1800.0),
                options.get("config_dir") or CONFIG_DIR,
            )
        except ArgumentError as err:
            print(f"fabric-test: {err}", file=sys.stderr)
            raise typer.Exit(2) from None
        return command(**options)

    return run
