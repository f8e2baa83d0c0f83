#!/usr/bin/env python3
"""All-reduce bandwidth benchmark over torch.distributed (NCCL), run by torchrun like any training job.

    torchrun --nnodes 2 --nproc-per-node 8 ... /opt/gpu-platform/node/fabric/allreduce_bench.py \
        --min-bytes 8 --max-bytes 1G --warmup 5 --iters 20

Rank 0 prints the result in the table format of nccl-tests' ``all_reduce_perf`` (header lines starting
with ``#``, one row per message size with out-of-place and in-place columns, the ``Avg bus bandwidth``
footer), so one parser (``ops/fabric/parse.py``) reads this output and recorded nccl-tests output alike.

Per size: ``warmup`` untimed all-reduces, then ``iters`` timed ones (CUDA events; the slowest rank's
mean is reported, as every rank waits for it). algbw = size / time (GB = 1e9 bytes), busbw = algbw *
2(n-1)/n for n ranks (nccl-tests' definition for all-reduce). Out-of-place copies the input into a
separate output buffer on the GPU before reducing it there (torch's all_reduce works in place), so its
time includes that device copy; in-place reduces the input buffer itself. After the timed iterations a
validation pass fills every rank's buffer with rank+1 and counts the elements that differ from
n(n+1)/2 (``#wrong``).

NCCL logs its transport choice (``Using network AWS Libfabric`` or ``Socket``) at INFO level; the
benchmark asks for the INIT and NET subsystems only, unless the job's environment set NCCL_DEBUG.

The math and the formatting are plain functions (no torch) so they are tested without a GPU; torch is
imported by ``main`` only. The file is self-contained: torchrun runs it by path on the node.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: Bytes per element of the benchmark's data type (float32).
ELEMENT_BYTES = 4
DTYPE = "float"
REDOP = "sum"
ROOT = -1  # all-reduce has no root: nccl-tests prints -1
GB = 1e9  # nccl-tests' GB/s are 1e9 bytes per second

_SUFFIXES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    """``8``, ``64K``, ``128M``, ``1G`` (binary multiples, as nccl-tests' -b/-e) to bytes."""
    value = text.strip().upper()
    suffix = value[-1] if value and value[-1] in "KMG" else ""
    digits = value[: len(value) - len(suffix)]
    if not digits.isdigit() or int(digits) <= 0:
        raise ValueError(f"{text!r} is not a size; fix: write a positive number of bytes, e.g. 8, 64K, 128M, 1G")
    return int(digits) * _SUFFIXES[suffix]


def message_sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """Sizes from ``min_bytes`` doubling (``factor``) up to ``max_bytes``, rounded down to whole elements."""
    if min_bytes < ELEMENT_BYTES or max_bytes < min_bytes or factor < 2:
        raise ValueError(
            f"sizes {min_bytes}..{max_bytes} x{factor}: fix: min >= {ELEMENT_BYTES} bytes, max >= min, factor >= 2"
        )
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size - size % ELEMENT_BYTES)
        size *= factor
    return sizes


def bus_factor(nranks: int) -> float:
    """busbw / algbw for all-reduce: 2(n-1)/n (0 for a single rank: nothing crosses a link)."""
    if nranks < 1:
        raise ValueError(f"{nranks} ranks: fix: run on at least one rank")
    return 2.0 * (nranks - 1) / nranks


@dataclass(frozen=True)
class Measure:
    """One column group of a row: mean time of one all-reduce, its bandwidths, wrong elements."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int


def measure(size_bytes: int, seconds: float, nranks: int, wrong: int = 0) -> Measure:
    """The bandwidths of one all-reduce of ``size_bytes`` that took ``seconds`` on ``nranks`` ranks."""
    algbw = size_bytes / GB / seconds if seconds > 0 else 0.0
    return Measure(time_us=seconds * 1e6, algbw=algbw, busbw=algbw * bus_factor(nranks), wrong=wrong)


def _time(us: float) -> str:
    return f"{us:7.2f}" if us < 1e5 else f"{us:7.0f}"


def format_row(size_bytes: int, out_of_place: Measure, in_place: Measure) -> str:
    """One table row, the columns of nccl-tests >= 2.11 (with root and integer #wrong)."""
    head = f"{size_bytes:>12d}  {size_bytes // ELEMENT_BYTES:>12d}  {DTYPE:>8}  {REDOP:>6}  {ROOT:>6d}"
    cells = [f"  {_time(m.time_us)}  {m.algbw:6.2f}  {m.busbw:6.2f}  {m.wrong:>5d}" for m in (out_of_place, in_place)]
    return head + "".join(cells)


def header_lines(
    *, min_bytes: int, max_bytes: int, factor: int, warmup: int, iters: int, ranks: Sequence[tuple[int, str, int, str]]
) -> list[str]:
    """The lines above the rows; ``ranks``: (pid, host, local device, device name) per rank, in rank order."""
    lines = [
        "# Collective test starting: all_reduce_perf",
        f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: {factor}(factor) "
        f"warmup iters: {warmup} iters: {iters} agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for rank, (pid, host, device, name) in enumerate(ranks):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host} device {device:2d} [0x00] {name}")
    lines += [
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]
    return lines


def footer_lines(rows: Sequence[tuple[int, Measure, Measure]]) -> list[str]:
    """Out-of-bounds count and the mean bus bandwidth over both columns of every row, as nccl-tests prints."""
    wrong = sum(oop.wrong + ip.wrong for _, oop, ip in rows)
    values = [m.busbw for _, oop, ip in rows for m in (oop, ip)]
    average = sum(values) / len(values) if values else 0.0
    return [
        f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
        f"# Avg bus bandwidth    : {average:g}",
        "#",
        "# Collective test concluded: all_reduce_perf",
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--min-bytes", default="8", help="smallest message (8, 64K, 1M ...), default 8")
    parser.add_argument("--max-bytes", default="1G", help="largest message, default 1G")
    parser.add_argument("--factor", type=int, default=2, help="size multiplier between rows, default 2")
    parser.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size, default 5")
    parser.add_argument("--iters", type=int, default=20, help="timed all-reduces per size, default 20")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - needs GPUs and torchrun
    args = parse_args(argv)
    try:
        min_bytes, max_bytes = parse_size(args.min_bytes), parse_size(args.max_bytes)
        sizes = message_sizes(min_bytes, max_bytes, args.factor)
    except ValueError as err:
        print(f"allreduce_bench: {err}", file=sys.stderr)
        return 2
    if "NCCL_DEBUG" not in os.environ:  # read by NCCL when the communicator is created, below
        os.environ["NCCL_DEBUG"] = "INFO"
        os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"

    import torch  # on the AMI (image pipeline), not in this repository's venv
    import torch.distributed as dist

    bench = _AllReduce(torch, dist)
    ranks = bench.ranks()
    if bench.rank == 0:
        header = header_lines(
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            factor=args.factor,
            warmup=args.warmup,
            iters=args.iters,
            ranks=ranks,
        )
        print("\n".join(header), flush=True)
    rows = []
    for size in sizes:
        rows.append(bench.row(size, warmup=args.warmup, iters=args.iters))
        if bench.rank == 0:
            print(format_row(*rows[-1]), flush=True)
    if bench.rank == 0:
        print("\n".join(footer_lines(rows)), flush=True)
    dist.destroy_process_group()
    return 0


class _AllReduce:  # pragma: no cover - needs GPUs and torchrun
    """This rank's side of the benchmark: its GPU in the NCCL process group, and the all-reduces it times.

    ``torch`` and ``torch.distributed`` are passed in: ``main`` imports them, on the node only.
    """

    def __init__(self, torch: Any, dist: Any) -> None:
        self.torch, self.dist = torch, dist
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(self.local_rank)
        self.device = torch.device("cuda", self.local_rank)
        dist.init_process_group("nccl", device_id=self.device)  # bound to this GPU: barriers need not guess it
        self.rank, self.nranks = dist.get_rank(), dist.get_world_size()

    def ranks(self) -> list[tuple[int, str, int, str]]:
        """(pid, host, local device, device name) of every rank, in rank order."""
        me = (os.getpid(), socket.gethostname(), self.local_rank, self.torch.cuda.get_device_name(self.local_rank))
        ranks: list[tuple[int, str, int, str]] = [me] * self.nranks
        self.dist.all_gather_object(ranks, me)
        return ranks

    def row(self, size: int, *, warmup: int, iters: int) -> tuple[int, Measure, Measure]:
        """One size: out-of-place, then in-place, each ``warmup`` untimed, ``iters`` timed, one validation pass."""
        torch, dist = self.torch, self.dist
        source = torch.zeros(size // ELEMENT_BYTES, dtype=torch.float32, device=self.device)
        target = torch.zeros_like(source)

        def out_of_place() -> None:
            target.copy_(source)
            dist.all_reduce(target)

        def in_place() -> None:
            dist.all_reduce(source)

        columns = []
        for fn, result in ((out_of_place, target), (in_place, source)):
            source.zero_()  # sums of zeros stay zero: the timed iterations never overflow
            for _ in range(warmup):
                fn()
            seconds = self.timed(fn, iters)
            source.fill_(self.rank + 1)  # the validation pass: every element must become n(n+1)/2
            fn()
            columns.append(measure(size, seconds, self.nranks, self.wrong(result)))
        return size, columns[0], columns[1]

    def timed(self, fn: Callable[[], None], count: int) -> float:
        """Mean seconds of one ``fn`` over ``count`` calls, on the slowest rank (every rank waits for it)."""
        torch, dist = self.torch, self.dist
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        start.record()
        for _ in range(count):
            fn()
        end.record()
        torch.cuda.synchronize()
        slowest = torch.tensor([start.elapsed_time(end) / 1e3 / count], device=self.device, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        return float(slowest.item())

    def wrong(self, result: Any) -> int:
        """Elements of ``result`` on every rank that differ from n(n+1)/2, the sum of the ranks' rank+1."""
        torch, nranks = self.torch, self.nranks
        torch.cuda.synchronize()
        bad = torch.tensor([int((result != nranks * (nranks + 1) / 2).sum().item())], device=self.device)
        self.dist.all_reduce(bad)
        return int(bad.item())


if __name__ == "__main__":
    sys.exit(main())
