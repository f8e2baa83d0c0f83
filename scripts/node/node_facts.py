#!/usr/bin/env python3
"""Facts about this node for bootstrap.sh, printed as KEY=value lines a shell reads without eval.

    node_facts.py identity [--imds-url URL]
        INSTANCE_ID=i-0123456789abcdef0
        INSTANCE_TYPE=p4d.24xlarge
    node_facts.py instance-type --file /etc/gpu-platform/instance-types.json --type p4d.24xlarge
        GPUS=8
        EFA_INTERFACES=4
        GPUDIRECT_RDMA=true

The instance types file is written by the fleet's user data from the checked-in catalog:
``{"p4d.24xlarge": {"gpus": 8, "efa_interfaces": 4, "gpudirect_rdma": true}, ...}``; other keys in
an entry are ignored. Exit status: 0 printed; 1 the fact cannot be had (IMDS unreachable, type not
in the file, file unreadable or malformed), with one line on stderr saying why; 2 bad arguments.

Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imds_client import DEFAULT_IMDS_URL, ImdsClient, ImdsError

if TYPE_CHECKING:
    from typing import TypeGuard

INSTANCE_TYPE_PATH = "/latest/meta-data/instance-type"
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")


class FactError(RuntimeError):
    """A fact the bootstrap needs cannot be had; the message is one line for the bootstrap log."""


@dataclass(frozen=True)
class InstanceTypeFacts:
    gpus: int
    efa_interfaces: int
    gpudirect_rdma: bool

    def lines(self) -> list[str]:
        return [
            f"GPUS={self.gpus}",
            f"EFA_INTERFACES={self.efa_interfaces}",
            f"GPUDIRECT_RDMA={'true' if self.gpudirect_rdma else 'false'}",
        ]


def identity(imds: ImdsClient) -> dict[str, str]:
    try:
        instance_id = imds.instance_id()
        instance_type = (imds.get(INSTANCE_TYPE_PATH) or "").strip()
    except ImdsError as err:
        raise FactError(str(err)) from err
    if not _INSTANCE_ID.fullmatch(instance_id):
        raise FactError(f"IMDS instance id {instance_id!r} is not an EC2 instance id")
    if not _INSTANCE_TYPE.fullmatch(instance_type):
        raise FactError(f"IMDS instance type {instance_type!r} is not an EC2 instance type")
    return {"INSTANCE_ID": instance_id, "INSTANCE_TYPE": instance_type}


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_instance_type(entries: Any, instance_type: str, source: str) -> InstanceTypeFacts:
    """The facts of one type from the decoded file; every problem is a FactError naming the file."""
    if not isinstance(entries, Mapping) or not entries:
        raise FactError(f"{source}: expected a non-empty JSON object of instance types")
    if instance_type not in entries:
        known = ", ".join(sorted(entries))
        raise FactError(
            f"{source}: instance type {instance_type} is not listed (it lists: {known}); "
            "fix: add it to the fleet's instance_types so the user data writes its entry"
        )
    entry = entries[instance_type]
    if not isinstance(entry, Mapping):
        raise FactError(f"{source}: {instance_type}: expected an object, got {type(entry).__name__}")
    gpus, efa, rdma = entry.get("gpus"), entry.get("efa_interfaces"), entry.get("gpudirect_rdma")
    if _is_int(gpus) and gpus >= 1 and _is_int(efa) and efa >= 0 and isinstance(rdma, bool):
        return InstanceTypeFacts(gpus=gpus, efa_interfaces=efa, gpudirect_rdma=rdma)
    problems = []
    if not _is_int(gpus) or gpus < 1:
        problems.append(f"gpus must be an integer >= 1, got {gpus!r}")
    if not _is_int(efa) or efa < 0:
        problems.append(f"efa_interfaces must be an integer >= 0, got {efa!r}")
    if not isinstance(rdma, bool):
        problems.append(f"gpudirect_rdma must be true or false, got {rdma!r}")
    raise FactError(f"{source}: {instance_type}: " + "; ".join(problems))


def instance_type_facts(path: Path, instance_type: str) -> InstanceTypeFacts:
    try:
        entries = json.loads(path.read_text())
    except OSError as err:
        raise FactError(f"cannot read {path}: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise FactError(f"{path}: not JSON: {err}") from err
    return parse_instance_type(entries, instance_type, str(path))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Print facts about this node as KEY=value lines.")
    commands = parser.add_subparsers(dest="command", required=True)
    ident = commands.add_parser("identity", help="INSTANCE_ID and INSTANCE_TYPE from IMDSv2")
    ident.add_argument("--imds-url", default=DEFAULT_IMDS_URL)
    ident.add_argument("--imds-timeout", type=float, default=2.0)
    facts = commands.add_parser("instance-type", help="GPUS, EFA_INTERFACES, GPUDIRECT_RDMA of one type")
    facts.add_argument("--file", type=Path, required=True, help="the instance types JSON file")
    facts.add_argument("--type", required=True, dest="instance_type")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "identity":
            imds = ImdsClient(args.imds_url, timeout_s=args.imds_timeout)
            lines = [f"{key}={value}" for key, value in identity(imds).items()]
        else:
            lines = instance_type_facts(args.file, args.instance_type).lines()
    except (FactError, ValueError) as err:
        print(f"node-facts: {err}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
