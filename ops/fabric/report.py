"""What ``gpu-platform job fabric-test`` prints: rich tables, or one JSON document (``--json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table as RichTable

from ops.fabric.ami import NodeAmi
from ops.fabric.judge import Verdict
from ops.fabric.parse import Table


@dataclass(frozen=True)
class FabricResult:
    env: str
    fleet: str
    instance_types: list[str]
    nodes: list[str]
    ami: NodeAmi
    run_id: str
    table: Table
    verdict: Verdict
    pairs: list[tuple[str, str]]
    pair_verdicts: list[Verdict]
    slow_pairs: list[bool]
    slow_nodes: list[str]

    @property
    def exit_code(self) -> int:
        """1 the fabric is measured and not good enough (all nodes or a pair), 2 it was not measured, else 0."""
        if self.verdict.failed or any(self.slow_pairs):
            return 1
        return 2 if self.verdict.status == "invalid" else 0


def _size(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _verdict(v: Verdict) -> dict[str, Any]:
    floor = None
    if v.floor is not None:
        floor = {
            "message_bytes": v.floor.message_bytes,
            "min_busbw_gbps": v.floor.min_busbw_gbps,
            "source": v.floor.source,
        }
    return {"status": v.status, "reason": v.reason, "message_bytes": v.size, "busbw_gbps": v.busbw, "floor": floor}


def as_json(result: FabricResult) -> dict[str, Any]:
    return {
        "env": result.env,
        "fleet": result.fleet,
        "instance_types": result.instance_types,
        "nodes": result.nodes,
        "ami": {"id": result.ami.image_id, "name": result.ami.name},
        "run_id": result.run_id,
        "ranks": result.table.ranks,
        "transport": result.table.transport,
        "rows": [
            {"size": r.size, "busbw_out_of_place": r.out_of_place.busbw, "busbw_in_place": r.in_place.busbw}
            for r in result.table.rows
        ],
        "average_busbw_gbps": result.table.average_busbw,
        "verdict": _verdict(result.verdict),
        "pairs": [
            {"nodes": list(pair), "slow": slow, **_verdict(v)}
            for pair, v, slow in zip(result.pairs, result.pair_verdicts, result.slow_pairs, strict=True)
        ],
        "slow_nodes": result.slow_nodes,
        "exit_code": result.exit_code,
    }


def print_json(result: FabricResult) -> None:
    print(json.dumps(as_json(result), indent=2, sort_keys=True))


def print_tables(result: FabricResult, console: Console | None = None) -> None:
    console = console or Console(highlight=False)
    table = RichTable(
        title=f"{result.env}/{result.fleet}: all-reduce across {len(result.nodes)} nodes "
        f"({', '.join(result.instance_types)}, {result.table.ranks or '?'} ranks, "
        f"transport {result.table.transport or 'not logged'})",
        box=box.SIMPLE,
    )
    for column in ("size", "busbw out-of-place (GB/s)", "busbw in-place (GB/s)"):
        table.add_column(column, justify="right")
    for row in result.table.rows:
        table.add_row(_size(row.size), f"{row.out_of_place.busbw:.2f}", f"{row.in_place.busbw:.2f}")
    console.print(table)
    name = result.ami.name or "name unknown: EC2 no longer describes it"
    console.print(f"nodes booted from AMI {result.ami.image_id} ({name})", soft_wrap=True)
    if result.pairs:
        pairs = RichTable(title="per node pair", box=box.SIMPLE)
        pairs.add_column("pair", no_wrap=True)
        for column in ("size", "busbw (GB/s)", "verdict"):
            pairs.add_column(column)
        for (a, b), v, slow in zip(result.pairs, result.pair_verdicts, result.slow_pairs, strict=True):
            busbw = f"{v.busbw:.2f}" if v.busbw is not None else "-"
            size = _size(v.size) if v.size is not None else "-"
            mark = "[red]slow[/]" if slow else "ok"
            pairs.add_row(f"{a} + {b}", size, busbw, f"{mark}: {v.reason}")
        console.print(pairs)
    colour = {0: "green", 1: "red", 2: "yellow"}[result.exit_code]
    console.print(f"[{colour}]{result.verdict.status}[/]: {result.verdict.reason}", soft_wrap=True)
    if result.verdict.floor is not None:
        console.print(f"floor source: {result.verdict.floor.source}", soft_wrap=True)
    if result.slow_nodes:
        console.print(f"[red]slow node(s)[/]: {', '.join(result.slow_nodes)} (slow in both of their pairs)")
    elif any(result.slow_pairs) and len(result.nodes) == 2:
        console.print("[red]the pair is slow[/]: with two nodes the check cannot tell which one; add a third node")
    console.print(f"metric FabricBusBandwidth published; job ids start with {result.run_id}")
