"""``job fabric-test``'s arguments checked before it looks for credentials (``ops.args``): a size the benchmark
cannot read (``--max-bytes 1X``), a message larger than the fleet's GPUs can hold twice, or a wait that is not a
positive number of seconds is one line and exit 2 before any AWS call."""

from __future__ import annotations

from pathlib import Path

from config.catalog import CatalogError, get_instance_type
from config.errors import ConfigError
from config.loader import load_environment
from ops import args


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
