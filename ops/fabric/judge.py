"""Judge a parsed all-reduce table against the floor of its instance type; name a slow node from pair runs."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from config.catalog.fabric_floors import FabricFloor
from ops.fabric.parse import Table

#: Statuses that fail the check (exit 1): the fabric was measured and is not good enough.
FAILING = ("below-floor", "wrong-results", "no-efa")
#: Without a floor, a pair below this share of the median pair is slow.
RELATIVE_SLOW = 0.8


@dataclass(frozen=True)
class Verdict:
    status: str
    """``pass``, ``no-floor`` (measured, nothing to compare with), one of ``FAILING``, or ``invalid``
    (the output does not measure the fabric: no table, another collective, one rank, no row at the size)."""
    reason: str
    size: int | None = None
    busbw: float | None = None
    """Bus bandwidth (GB/s) at ``size``: the better of out-of-place and in-place."""
    floor: FabricFloor | None = None

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    @property
    def measured(self) -> bool:
        return self.busbw is not None


def _gib(size: int) -> str:
    return f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size} B"


def judge(table: Table, floor: FabricFloor | None, *, expect_efa: bool) -> Verdict:
    """The verdict of one run. The floor's size is compared with the first row at or above it (bus
    bandwidth grows with the message size up to its plateau, so a larger row never judges harsher)."""
    if not table.rows:
        return Verdict("invalid", "no all_reduce_perf table in the output")
    if not table.is_all_reduce:
        what = table.collective or f"redop {table.rows[0].redop}, root {table.rows[0].root}"
        return Verdict("invalid", f"the table is not an all-reduce ({what}); fix: run all_reduce_perf")
    if table.ranks == 1:
        return Verdict("invalid", "one rank: bus bandwidth is 0 by definition; fix: run on at least two nodes")
    wrong = table.wrong if table.wrong is not None else table.out_of_bounds
    if wrong:
        return Verdict("wrong-results", f"{wrong} elements reduced to a wrong value: a GPU or link corrupts data")
    size = floor.message_bytes if floor else max(r.size for r in table.rows)
    row = min((r for r in table.rows if r.size >= size), key=lambda r: r.size, default=None)
    if row is None:
        largest = max(r.size for r in table.rows)
        return Verdict(
            "invalid", f"no row at {_gib(size)} (the run stopped at {_gib(largest)}); fix: run up to {_gib(size)}"
        )
    if expect_efa and table.transport == "socket":
        return Verdict(
            "no-efa",
            "NCCL used TCP sockets, not EFA (no aws-ofi-nccl plugin or no EFA device)",
            row.size,
            row.busbw,
            floor,
        )
    if floor is None:
        return Verdict(
            "no-floor", "no floor for this instance type in config/catalog/fabric_floors.csv", row.size, row.busbw
        )
    if row.busbw < floor.min_busbw_gbps:
        return Verdict(
            "below-floor",
            f"{row.busbw:.2f} GB/s at {_gib(row.size)} is below the floor {floor.min_busbw_gbps:g} GB/s",
            row.size,
            row.busbw,
            floor,
        )
    return Verdict(
        "pass", f"{row.busbw:.2f} GB/s at {_gib(row.size)} >= {floor.min_busbw_gbps:g} GB/s", row.size, row.busbw, floor
    )


def slow_pairs(verdicts: Sequence[Verdict]) -> list[bool]:
    """Which pair runs are slow: failing against the floor, or (no floor) below 80% of the median pair.
    A pair that did not measure (invalid) is slow too: its nodes could not run the benchmark together."""
    measured = [v.busbw for v in verdicts if v.busbw is not None]
    median = statistics.median(measured) if measured else 0.0
    return [
        v.failed or not v.measured or (v.floor is None and (v.busbw or 0.0) < RELATIVE_SLOW * median) for v in verdicts
    ]


def slow_nodes(pairs: Sequence[tuple[str, str]], slow: Sequence[bool]) -> list[str]:
    """Nodes slow in every pair they are in, when they are in at least two (with two nodes, one pair
    cannot tell which of them is slow)."""
    seen: dict[str, list[bool]] = {}
    for (a, b), is_slow in zip(pairs, slow, strict=True):
        for node in (a, b):
            seen.setdefault(node, []).append(is_slow)
    return sorted(node for node, marks in seen.items() if len(marks) >= 2 and all(marks))


def ring_pairs(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """(0,1), (1,2), ..., (n-1,0): each node in two pairs; a single pair for two nodes."""
    if len(nodes) < 2:
        return []
    if len(nodes) == 2:
        return [(nodes[0], nodes[1])]
    return [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]


def waves(pairs: Sequence[tuple[str, str]]) -> list[list[int]]:
    """Pair indexes grouped so that no node is in two pairs of one wave (they run at the same time)."""
    result: list[tuple[set[str], list[int]]] = []
    for index, pair in enumerate(pairs):
        for busy, members in result:
            if not busy & set(pair):
                busy.update(pair)
                members.append(index)
                break
        else:
            result.append((set(pair), [index]))
    return [members for _, members in result]
