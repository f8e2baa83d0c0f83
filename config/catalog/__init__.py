"""The checked-in GPU instance catalog: the one place that knows instance facts.

``gpu_instances.csv`` (next to this file) holds one row per EC2 GPU instance type:
GPUs, vCPUs, memory, network cards, EFA interfaces, interconnect and price.
``SOURCES.md`` says where each column comes from; the hardware columns are
rewritten from ``ec2:DescribeInstanceTypes`` by ``scripts/refresh_instance_catalog.py``.

Everything else in the project (config validation, launch templates, alarms) asks
this module instead of writing a number such as "p4d has 4 EFA interfaces" itself,
so that one refresh of the CSV updates every consumer at once.
"""

from __future__ import annotations

import csv
import difflib
import functools
import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

CATALOG_PATH = Path(__file__).resolve().parent / "gpu_instances.csv"
_REPO_ROOT = CATALOG_PATH.parents[2]

#: The CSV columns, in file order.
COLUMNS = (
    "instance_type",
    "family",
    "gpu_count",
    "gpu_model",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "network_cards",
    "max_efa_interfaces",
    "efa_supported",
    "nvswitch",
    "gpudirect_rdma",
    "network_performance",
    "on_demand_usd_per_hour",
)

#: Columns the refresh script rewrites from DescribeInstanceTypes.
HARDWARE_COLUMNS = (
    "gpu_count",
    "gpu_model",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "network_cards",
    "max_efa_interfaces",
    "efa_supported",
    "network_performance",
)

#: Columns no EC2 API reports: kept by hand (see SOURCES.md), never touched by the refresh.
HAND_KEPT_COLUMNS = ("nvswitch", "gpudirect_rdma", "on_demand_usd_per_hour")

_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
_SUGGESTION_CUTOFF = 0.85  # below this difflib proposes unrelated types (m5.large -> g5.xlarge)
_SUGGESTIONS = 3  # the nearest names, closest first


class CatalogError(ValueError):
    """The catalog file itself is broken (missing, wrong header, bad cell): one line, with file and line."""


class UnknownInstanceType(ValueError):
    """A name that is not in the catalog; the message names it and suggests the closest entries (up to 3)."""


class InstanceType(BaseModel):
    """One row of the catalog: the facts of one EC2 GPU instance type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str
    family: str
    gpu_count: Annotated[int, Field(ge=1)]
    gpu_model: str
    gpu_memory_gib: Annotated[float, Field(gt=0)]
    """Memory of one GPU, as EC2 reports it (GpuInfo MemoryInfo.SizeInMiB / 1024)."""
    vcpus: Annotated[int, Field(ge=1)]
    memory_gib: Annotated[float, Field(gt=0)]
    network_cards: Annotated[int, Field(ge=1)]
    """NetworkInfo.MaximumNetworkCards."""
    max_efa_interfaces: Annotated[int, Field(ge=0)]
    """NetworkInfo.EfaInfo.MaximumEfaInterfaces; 0 when the type has no EFA."""
    efa_supported: bool
    nvswitch: bool
    """GPUs joined by NVSwitch inside the instance (hand-kept)."""
    gpudirect_rdma: bool
    """EFA can read and write GPU memory directly (hand-kept)."""
    network_performance: str
    on_demand_usd_per_hour: Annotated[float, Field(gt=0)] | None
    """us-east-1 Linux On-Demand price; None where the type has no On-Demand price there."""

    @field_validator("instance_type")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _INSTANCE_TYPE.match(value):
            raise ValueError(
                f"{value!r} is not an EC2 instance type name; fix: write it as family.size, e.g. g5.xlarge"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> InstanceType:
        # These rules catch a hand edit that contradicts itself; each names the fix.
        if self.family != self.instance_type.split(".", 1)[0]:
            raise ValueError(
                f"family {self.family!r} does not match {self.instance_type}; fix: set it to {self.instance_type.split('.', 1)[0]!r}"
            )
        if self.efa_supported != (self.max_efa_interfaces > 0):
            raise ValueError(
                f"efa_supported is {str(self.efa_supported).lower()} but max_efa_interfaces is {self.max_efa_interfaces}; fix: refresh the row from DescribeInstanceTypes"
            )
        if self.max_efa_interfaces > self.network_cards:
            raise ValueError(
                f"max_efa_interfaces {self.max_efa_interfaces} exceeds network_cards {self.network_cards}; fix: refresh the row from DescribeInstanceTypes"
            )
        if self.gpudirect_rdma and not self.efa_supported:
            raise ValueError("gpudirect_rdma is true on a type without EFA; fix: set gpudirect_rdma to false")
        return self

    @property
    def size(self) -> str:
        """The part after the dot: ``xlarge``, ``48xlarge``, ``metal``."""
        return self.instance_type.split(".", 1)[1]


def _display(path: Path) -> str:
    """The path as people know it: relative to the repository when it lies inside it."""
    try:
        return str(path.resolve().relative_to(_REPO_ROOT))
    except ValueError:
        return str(path)


def _cell_value(column: str, text: str) -> object:
    """CSV text to the value pydantic validates: empty price is None, booleans are true/false only."""
    if column == "on_demand_usd_per_hour" and text == "":
        return None
    if column in ("efa_supported", "nvswitch", "gpudirect_rdma"):
        if text not in ("true", "false"):
            raise ValueError(f"{column}: {text!r} is not a boolean; fix: write true or false")
        return text == "true"
    return text


def _parse_row(row: dict[str, str]) -> InstanceType:
    values = {column: _cell_value(column, row[column]) for column in COLUMNS}
    try:
        return InstanceType.model_validate(values)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        text = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"{where}: {text}" if where else text) from None


def read_catalog(path: Path | str = CATALOG_PATH) -> dict[str, InstanceType]:
    """Read and validate a catalog file (uncached; the refresh script checks what it writes with it)."""
    path = Path(path)
    shown = _display(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise CatalogError(f"{shown}: line 1: the header must be {','.join(COLUMNS)}")
            catalog: dict[str, InstanceType] = {}
            for row in reader:
                line = reader.line_num
                if None in row or any(v is None for v in row.values()):
                    raise CatalogError(f"{shown}: line {line}: expected {len(COLUMNS)} cells")
                try:
                    item = _parse_row(row)
                except ValueError as err:
                    raise CatalogError(f"{shown}: line {line}: {row['instance_type']}: {err}") from None
                if item.instance_type in catalog:
                    raise CatalogError(f"{shown}: line {line}: {item.instance_type} is listed twice; fix: keep one row")
                catalog[item.instance_type] = item
    except FileNotFoundError:
        raise CatalogError(f"{shown}: file not found") from None
    return catalog


@functools.lru_cache(maxsize=8)
def _cached(path: Path) -> dict[str, InstanceType]:
    return read_catalog(path)


def load_catalog(path: Path | str = CATALOG_PATH) -> dict[str, InstanceType]:
    """The catalog by instance type name, in file order; read once per path and process."""
    # A fresh dict each time: a caller that edits its copy cannot change what others see.
    return dict(_cached(Path(path).resolve()))


def _unknown(what: str, name: str, known: list[str], listing: str, path: Path) -> UnknownInstanceType:
    close = difflib.get_close_matches(name.lower(), known, n=_SUGGESTIONS, cutoff=_SUGGESTION_CUTOFF)
    family = name.lower().split(".", 1)[0]
    refresh = f"to add a GPU family or size, run scripts/refresh_instance_catalog.py --families {family}"
    named = " or ".join([", ".join(close[:-1]), close[-1]] if len(close) > 1 else close)
    hint = f"did you mean {named}?" if close else f"{listing}; {refresh}"
    return UnknownInstanceType(f"{what}{name} is not in the GPU instance catalog; {hint} ({_display(path)})")


def _families(catalog: dict[str, InstanceType]) -> list[str]:
    return list(dict.fromkeys(item.family for item in catalog.values()))


def get_instance_type(name: str, path: Path | str = CATALOG_PATH) -> InstanceType:
    """The catalog row of ``name``; an ``UnknownInstanceType`` that suggests a close match otherwise."""
    catalog = load_catalog(path)
    try:
        return catalog[name]
    except KeyError:
        listing = f"it lists the families {', '.join(_families(catalog))}"
        raise _unknown("", name, list(catalog), listing, Path(path)) from None


def efa_sizes(family: str, path: Path | str = CATALOG_PATH) -> list[str]:
    """The sizes of ``family`` that support EFA, in catalog order (``["8xlarge", ..., "metal"]``)."""
    catalog = load_catalog(path)
    members = [item for item in catalog.values() if item.family == family]
    if not members:
        families = _families(catalog)
        raise _unknown("family ", family, families, f"it lists the families {', '.join(families)}", Path(path))
    return [item.size for item in members if item.efa_supported]


def efa_layout(name: str, path: Path | str = CATALOG_PATH) -> tuple[int, ...]:
    """Network card indexes that carry one EFA interface each: ``(0, 1, 2, 3)`` for p4d.24xlarge.

    A launch template gets one EFA interface per network card, up to the type's
    MaximumEfaInterfaces; a type without EFA gets ``()``.
    """
    return tuple(range(get_instance_type(name, path).max_efa_interfaces))


__all__ = [
    "CATALOG_PATH",
    "COLUMNS",
    "HAND_KEPT_COLUMNS",
    "HARDWARE_COLUMNS",
    "CatalogError",
    "InstanceType",
    "UnknownInstanceType",
    "efa_layout",
    "efa_sizes",
    "get_instance_type",
    "load_catalog",
    "read_catalog",
]
