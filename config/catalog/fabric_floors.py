"""Floors of the fabric check: the all-reduce bus bandwidth a healthy fleet of an instance type reaches.

``fabric_floors.csv`` (next to this file) holds one row per EFA training type: the message size the
floor applies to, the minimum bus bandwidth in GB/s (nccl-tests' busbw, 1e9 bytes/s) and where the
number comes from; ``SOURCES.md`` ("Fabric floors") gives each source in full. A type without a row
has no floor: ``gpu-platform job fabric-test`` then reports the bandwidth and says so.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

from config.catalog import CatalogError, UnknownInstanceType, _display, get_instance_type

FLOORS_PATH = Path(__file__).resolve().parent / "fabric_floors.csv"
FLOOR_COLUMNS = ("instance_type", "message_bytes", "min_busbw_gbps", "source")


@dataclass(frozen=True)
class FabricFloor:
    instance_type: str
    message_bytes: int
    min_busbw_gbps: float
    source: str


def _row(row: dict[str, str]) -> FabricFloor:
    try:
        get_instance_type(row["instance_type"])
    except UnknownInstanceType as err:
        raise ValueError(f"instance_type: {err}") from None
    if not row["message_bytes"].isdigit() or int(row["message_bytes"]) <= 0:
        raise ValueError(
            f"message_bytes: {row['message_bytes']!r}; fix: write a positive number of bytes, e.g. 1073741824"
        )
    try:
        floor = float(row["min_busbw_gbps"])
    except ValueError:
        floor = 0.0
    if floor <= 0:
        raise ValueError(f"min_busbw_gbps: {row['min_busbw_gbps']!r}; fix: write a positive number of GB/s, e.g. 26.0")
    if not row["source"].strip():
        raise ValueError("source: empty; fix: name where the floor comes from (and describe it in SOURCES.md)")
    return FabricFloor(row["instance_type"], int(row["message_bytes"]), floor, row["source"].strip())


def read_floors(path: Path | str = FLOORS_PATH) -> dict[str, FabricFloor]:
    """Read and validate a floors file: one-line ``CatalogError`` naming file, line, field and fix."""
    path = Path(path)
    shown = _display(path)
    floors: dict[str, FabricFloor] = {}
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if tuple(reader.fieldnames or ()) != FLOOR_COLUMNS:
                raise CatalogError(f"{shown}: line 1: the header must be {','.join(FLOOR_COLUMNS)}")
            for row in reader:
                if None in row or any(v is None for v in row.values()):
                    raise CatalogError(f"{shown}: line {reader.line_num}: expected {len(FLOOR_COLUMNS)} cells")
                try:
                    floor = _row(row)
                except ValueError as err:
                    raise CatalogError(f"{shown}: line {reader.line_num}: {err}") from None
                if floor.instance_type in floors:
                    raise CatalogError(
                        f"{shown}: line {reader.line_num}: {floor.instance_type} is listed twice; fix: keep one row"
                    )
                floors[floor.instance_type] = floor
    except FileNotFoundError:
        raise CatalogError(f"{shown}: file not found") from None
    return floors


@functools.lru_cache(maxsize=4)
def _cached(path: Path) -> dict[str, FabricFloor]:
    return read_floors(path)


def fabric_floor(instance_type: str, path: Path | str = FLOORS_PATH) -> FabricFloor | None:
    """The floor of ``instance_type``; None when the table has none for it."""
    return _cached(Path(path).resolve()).get(instance_type)


__all__ = ["FLOORS_PATH", "FLOOR_COLUMNS", "FabricFloor", "fabric_floor", "read_floors"]
