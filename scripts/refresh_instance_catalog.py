#!/usr/bin/env python3
"""Rewrite the hardware columns of the GPU instance catalog from ec2:DescribeInstanceTypes.

An operator runs this from a laptop with AWS credentials when AWS changes an
instance type or launches new sizes. It rewrites only what the API reports
(GPUs, vCPUs, memory, network cards, EFA interfaces, network performance) and
keeps the hand-kept columns (nvswitch, gpudirect_rdma, the price) as they are.
With ``--families`` it also adds the sizes of those families that the catalog
lacks, with an empty price and false hand-kept flags for a person to review.

    scripts/refresh_instance_catalog.py --dry-run
    scripts/refresh_instance_catalog.py --families g6e,p5 --region us-west-2

The default region is us-west-2 because it offers every type in the catalog
(us-east-1 has no p5e.48xlarge); the hardware of a type is the same everywhere.
Errors print one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a file, the script still finds the config package

from config.catalog import CATALOG_PATH, COLUMNS, HARDWARE_COLUMNS, CatalogError, read_catalog  # noqa: E402

DEFAULT_REGION = "us-west-2"
_BATCH = 100  # DescribeInstanceTypes takes at most 100 names per call
_FAMILY = re.compile(r"^[a-z][a-z0-9-]*$")
_SIZE_ORDER = ("nano", "micro", "small", "medium", "large", "xlarge")

Row = dict[str, str]


class RefreshError(Exception):
    """A problem the operator must fix; its text is the one line printed."""


@dataclass(frozen=True)
class Change:
    instance_type: str
    column: str
    old: str
    new: str


def _number(value: float) -> str:
    """Whole numbers without a decimal point, others to two places: the CSV stays stable between refreshes."""
    return str(int(value)) if float(value).is_integer() else f"{round(value, 2):g}"


def hardware_cells(info: dict[str, Any]) -> Row:
    """The hardware columns of one DescribeInstanceTypes entry, formatted as the CSV writes them."""
    name = info["InstanceType"]
    gpus = info.get("GpuInfo", {}).get("Gpus") or []
    if not gpus:
        raise RefreshError(f"{name} has no GPU (no GpuInfo); fix: the catalog holds GPU instance types only")
    gpu, network = gpus[0], info["NetworkInfo"]
    if gpu["Count"] < 1:
        raise RefreshError(
            f"{name} has a fraction of a GPU (GpuPartitionSize {gpu.get('GpuPartitionSize')}); fix: the catalog holds whole-GPU types only, leave its family out of --families"
        )
    return {
        "gpu_count": str(gpu["Count"]),
        "gpu_model": f"{gpu['Manufacturer']} {gpu['Name']}",
        "gpu_memory_gib": _number(gpu["MemoryInfo"]["SizeInMiB"] / 1024),
        "vcpus": str(info["VCpuInfo"]["DefaultVCpus"]),
        "memory_gib": _number(info["MemoryInfo"]["SizeInMiB"] / 1024),
        "network_cards": str(network["MaximumNetworkCards"]),
        "max_efa_interfaces": str(network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)),
        "efa_supported": "true" if network.get("EfaSupported") else "false",
        "network_performance": network["NetworkPerformance"],
    }


def _batches(names: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(names), _BATCH):
        yield list(names[start : start + _BATCH])


def describe(ec2: Any, *, names: Sequence[str] = (), families: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """DescribeInstanceTypes for the named types and for every size of the families, by name."""
    paginator = ec2.get_paginator("describe_instance_types")
    found: dict[str, dict[str, Any]] = {}
    requests: list[dict[str, Any]] = [{"InstanceTypes": batch} for batch in _batches(names)]
    requests += [{"Filters": [{"Name": "instance-type", "Values": [f"{family}.*"]}]} for family in families]
    for request in requests:
        for page in paginator.paginate(**request):
            for info in page["InstanceTypes"]:
                found[info["InstanceType"]] = info
    return found


def read_rows(path: Path) -> list[Row]:
    """The catalog as text cells, so that untouched cells are written back byte for byte."""
    if not path.is_file():
        raise RefreshError(f"{path}: file not found; fix: pass --catalog with the path of gpu_instances.csv")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise RefreshError(f"{path}: line 1: the header must be {','.join(COLUMNS)}")
        return list(reader)


def _size_key(instance_type: str) -> tuple[int, int, str]:
    """Order sizes as AWS lists them: large < xlarge < 2xlarge < ... < 48xlarge < metal."""
    size = instance_type.split(".", 1)[1]
    match = re.fullmatch(r"(\d*)(nano|micro|small|medium|large|xlarge)", size)
    if not match:
        return (len(_SIZE_ORDER), 0, size)
    return (_SIZE_ORDER.index(match.group(2)), int(match.group(1) or 1), size)


def _new_row(name: str, cells: Row) -> Row:
    row = dict.fromkeys(COLUMNS, "")
    row.update(cells, instance_type=name, family=name.split(".", 1)[0], nvswitch="false", gpudirect_rdma="false")
    return row


def _insert(rows: list[Row], new_rows: list[Row]) -> list[Row]:
    """Put new rows (in size order) after the last row of their family, or at the end for a new family."""
    out = list(rows)
    for row in new_rows:
        positions = [i for i, r in enumerate(out) if r["family"] == row["family"]]
        at = positions[-1] + 1 if positions else len(out)
        out.insert(at, row)
    return out


def plan(
    rows: list[Row], found: dict[str, dict[str, Any]], families: Sequence[str]
) -> tuple[list[Row], list[Change], list[str]]:
    """The refreshed rows, the changed cells and the added types; nothing is written here."""
    changes: list[Change] = []
    refreshed: list[Row] = []
    for row in rows:
        name = row["instance_type"]
        if name not in found:  # a family outside --families: left as it is
            refreshed.append(row)
            continue
        cells = hardware_cells(found[name])
        changes += [Change(name, c, row[c], cells[c]) for c in HARDWARE_COLUMNS if row[c] != cells[c]]
        refreshed.append({**row, **cells})
    known = {row["instance_type"] for row in rows}
    new = [name for name in found if name not in known and name.split(".", 1)[0] in families]
    added = sorted(new, key=lambda name: (name.split(".", 1)[0], _size_key(name)))  # API order is not stable
    new_rows = [_new_row(name, hardware_cells(found[name])) for name in added]
    return _insert(refreshed, new_rows), changes, added


def write_rows(path: Path, rows: list[Row]) -> None:
    """Write atomically, and only a file the catalog loader accepts."""
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, before the rename
        "w", newline="", encoding="utf-8", dir=path.parent, prefix=".gpu_instances.", suffix=".csv", delete=False
    )
    tmp = Path(handle.name)
    try:
        with handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        read_catalog(tmp)
        tmp.chmod(path.stat().st_mode & 0o777)  # a temporary file is 0600; keep the catalog's own mode
        os.replace(tmp, path)
    except CatalogError as err:
        raise RefreshError(f"the refreshed catalog would not load ({err}); nothing written") from None
    finally:
        tmp.unlink(missing_ok=True)


def _families(text: str | None) -> list[str]:
    if not text:
        return []
    families = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in families if not _FAMILY.match(f)]
    if bad:
        raise RefreshError(f"--families: {bad[0]!r} is not an instance family; fix: give names such as g6e,p5")
    return families


def _aws_error(err: Exception, region: str) -> RefreshError:
    """One line for what the AWS call said, with the fix an operator needs."""
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return RefreshError(
            "no AWS credentials found; fix: set AWS_PROFILE (or run 'aws sso login') for an account that may call ec2:DescribeInstanceTypes"
        )
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        message = err.response.get("Error", {}).get("Message", "")
        if code == "InvalidInstanceType":
            return RefreshError(
                f"EC2 in {region} does not know a catalog type: {message}; fix: pass --region where it is offered, or delete its row"
            )
        return RefreshError(f"DescribeInstanceTypes in {region} failed: {code}: {message}")
    return RefreshError(f"DescribeInstanceTypes in {region} failed: {err}")


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _summary(changes: list[Change], added: list[str], dry_run: bool) -> list[str]:
    lines = [f"{c.instance_type}: {c.column}: {c.old!r} -> {c.new!r}" for c in changes]
    lines += [f"{name}: new row; fix by hand: on_demand_usd_per_hour, nvswitch, gpudirect_rdma" for name in added]
    rows = len({c.instance_type for c in changes})
    verb = "would change" if dry_run else "changed"
    lines.append(
        f"{len(changes)} cell(s) in {rows} row(s) {verb}; {len(added)} row(s) {'would be ' if dry_run else ''}added"
    )
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", type=Path, default=CATALOG_PATH, help="the CSV to refresh (default: %(default)s)")
    parser.add_argument("--region", default=DEFAULT_REGION, help="region to ask (default: %(default)s)")
    parser.add_argument(
        "--families", help="comma-separated families to refresh and complete with new sizes, e.g. g6e,p5"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the changed cells, write nothing")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> list[str]:
    families = _families(args.families)
    rows = read_rows(args.catalog)
    names = [r["instance_type"] for r in rows if not families or r["family"] in families]
    try:
        ec2 = boto3.client("ec2", region_name=args.region)
        found = describe(ec2, names=names, families=families)
    except (BotoCoreError, ClientError) as err:
        raise _aws_error(err, args.region) from None
    empty = [f for f in families if not any(n.split(".", 1)[0] == f for n in found)]
    if empty:
        raise RefreshError(f"--families: EC2 in {args.region} has no instance types of family {empty[0]!r}")
    refreshed, changes, added = plan(rows, found, families)
    lines = _summary(changes, added, args.dry_run)
    if args.dry_run:
        lines.append("dry run: nothing written")
    elif changes or added:
        write_rows(args.catalog, refreshed)
        lines.append(f"wrote {_shown(args.catalog)}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        lines = run(args)
    except RefreshError as err:
        print(f"refresh_instance_catalog: error: {err}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
