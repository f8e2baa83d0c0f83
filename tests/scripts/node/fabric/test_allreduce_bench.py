"""The all-reduce benchmark's torch-free parts: sizes, nccl-tests' bandwidth definitions, and a table the
fabric check's parser reads back exactly (the torch part runs on GPU machines only)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ops.fabric.parse import parse
from tests.scripts.node.helpers import NODE_DIR

# isort: split
from fabric.allreduce_bench import (
    bus_factor,
    footer_lines,
    format_row,
    header_lines,
    measure,
    message_sizes,
    parse_size,
)


def test_sizes_double_from_8_bytes_to_1_gib() -> None:
    sizes = message_sizes(8, parse_size("1G"))
    assert sizes[:3] == [8, 16, 32] and sizes[-1] == 2**30 and len(sizes) == 28
    assert message_sizes(6, 20, 3) == [4, 16]  # whole float32 elements
    assert [parse_size(s) for s in ("8", "64K", "128m", "16G")] == [8, 65536, 2**27, 16 * 2**30]
    for bad in ("0", "1T", "", "-8"):
        with pytest.raises(ValueError, match="fix:"):
            parse_size(bad)
    with pytest.raises(ValueError, match="fix:"):
        message_sizes(2, 8)


def test_bus_bandwidth_is_nccl_tests_definition() -> None:
    assert [bus_factor(n) for n in (1, 2, 16)] == [0.0, 1.0, 1.875]
    m = measure(2**30, 0.01, 16)
    assert m.algbw == pytest.approx(107.374, abs=1e-3)  # 1 GiB in 10 ms, GB = 1e9 bytes
    assert m.busbw == pytest.approx(m.algbw * 1.875) and m.time_us == pytest.approx(10000)


def test_the_printed_table_parses_back_to_the_same_figures() -> None:
    rows = []
    for size in message_sizes(8, 2**30):
        oop = measure(size, 20e-6 + size / 45e9, 16)
        ip = measure(size, 19e-6 + size / 46e9, 16, wrong=0)
        rows.append((size, oop, ip))
    ranks = [(100 + r, f"ip-10-0-0-{r // 8}", r % 8, "NVIDIA A100-SXM4-40GB") for r in range(16)]
    text = "\n".join(
        header_lines(min_bytes=8, max_bytes=2**30, factor=2, warmup=5, iters=20, ranks=ranks)
        + [format_row(*row) for row in rows]
        + footer_lines(rows)
    )
    table = parse(text)
    assert (table.collective, table.is_all_reduce, table.ranks, table.ranks_from) == (
        "all_reduce_perf",
        True,
        16,
        "header",
    )
    assert [r.size for r in table.rows] == [size for size, _, _ in rows]
    last = table.rows[-1]
    assert last.out_of_place.busbw == round(rows[-1][1].busbw, 2) and last.in_place.busbw == round(rows[-1][2].busbw, 2)
    assert table.wrong == 0 and table.out_of_bounds == 0
    expected_average = sum(m.busbw for _, a, b in rows for m in (a, b)) / (2 * len(rows))
    assert table.average_busbw == pytest.approx(expected_average, rel=1e-5)


def test_wrong_elements_reach_the_footer() -> None:
    rows = [(1024, measure(1024, 1e-5, 2, wrong=3), measure(1024, 1e-5, 2))]
    assert footer_lines(rows)[0] == "# Out of bounds values : 3 FAILED"
    assert parse("\n".join([format_row(*rows[0]), *footer_lines(rows)])).wrong == 3


def test_the_script_prints_usage_and_refuses_a_bad_size_without_torch() -> None:
    script = NODE_DIR / "fabric" / "allreduce_bench.py"
    usage = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 0 and "--max-bytes" in usage.stdout
    bad = subprocess.run([sys.executable, str(script), "--max-bytes", "1T"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and bad.stderr.startswith("allreduce_bench: ") and "fix:" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
