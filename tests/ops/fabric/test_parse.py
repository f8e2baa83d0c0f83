"""The all_reduce_perf parser against every recorded nccl-tests output of ../shared/reference and hand-written
variants of the formats (these run without ../shared)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.fabric.parse import parse, parse_row, strip_prefix
from tests.reference import REFERENCE_DIR, reference_path

#: Without ../shared one stand-in case, so that the test skips naming the folder it lacks (reference_path).
CASE_NAMES = sorted(p.parent.name for p in (REFERENCE_DIR / "nccl-tests-outputs").glob("*/case.json")) or [
    "(reference folder absent)"
]


def _case(name: str) -> tuple[dict, str]:
    folder = reference_path("nccl-tests-outputs", name)
    return json.loads((folder / "case.json").read_text()), (folder / "output.txt").read_text()


def test_every_reference_case_is_covered() -> None:
    folder = reference_path("nccl-tests-outputs")
    assert len([p for p in Path(folder).iterdir() if p.is_dir()]) == len(CASE_NAMES) >= 16


@pytest.mark.parametrize("name", CASE_NAMES)
def test_reference_case_figures(name: str) -> None:
    """Rows, peaks, footer average and #wrong as the case's README computed them from the same text."""
    case, text = _case(name)
    table = parse(text)
    assert len(table.rows) == case["rows"]
    assert [table.rows[0].size, max(r.size for r in table.rows)] == case["size_range_bytes"]
    assert round(table.peak_busbw, 2) == case["peak_busbw_gbps"]
    assert round(table.peak_busbw_in_place, 2) == case["peak_busbw_in_place_gbps"]
    assert table.average_busbw == case["avg_busbw_gbps"]
    assert table.wrong == case["wrong"]
    if case["out_of_bounds"] is not None:
        assert table.out_of_bounds == int(case["out_of_bounds"].split()[0])


@pytest.mark.parametrize(
    ("name", "transport", "nics"),
    [
        ("g5.2xlarge-x2-1gpu-socket-no-efa-allreduce", "socket", None),
        ("g4dn.metal-x2-1gpu-eks-efa-allreduce-full-log", "efa", 1),
        ("p4d-x2-efa-scatter-debug-info-full-log", "efa", 4),
        ("p4d-x2-eks-efa-allreduce-nccl2.9.9-old-format-full-log", "efa", None),
        ("p5-x2-eks-efa-allreduce-16G-tfblueprints", None, None),
    ],
)
def test_transport_from_nccl_lines(name: str, transport: str | None, nics: int | None) -> None:
    table = parse(_case(name)[1])
    assert (table.transport, table.efa_nics) == (transport, nics)


def test_single_rank_and_other_collectives_are_recognised() -> None:
    single = parse(_case("g5.2xlarge-1gpu-single-rank-busbw-zero")[1])
    assert (single.ranks, single.ranks_from, single.is_all_reduce) == (1, "header", True)
    scatter = parse(_case("p4d-x2-efa-scatter-debug-info-full-log")[1])
    assert (scatter.ranks, scatter.is_all_reduce) == (16, False)
    assert {r.redop for r in scatter.rows} == {"none"}


HAND = """\
 0: # nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
 0: #   Rank  0 Pid   1465 on ip-10-0-1-1 device  0 [0x00] A100-SXM4-40GB
 0: #   Rank  1 Pid     46 on ip-10-0-1-2 device  0 [0x00] A100-SXM4-40GB
 0: #       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
 0: ip-10-0-1-1:1465:1470 [0] NCCL INFO Launch mode Parallel
 0:            8             2     float     sum    172.7    0.00    0.00  0e+00    168.9    0.00    0.00  0e+00
10: ip-10-0-1-2:46:50 [0] NCCL INFO Using network Socket
 0:         ...
 0:   1073741824     268435456     float     sum   705156    1.52    1.52  2e-07   705100    1.52    1.52  2e-07
 0: # Out of bounds values : 0 OK
 0: # Avg bus bandwidth    : 0.76 \
"""


def test_hand_written_old_format_with_slurm_labels_and_noise() -> None:
    table = parse(HAND)
    assert [(r.size, r.root, r.out_of_place.wrong) for r in table.rows] == [(8, None, None), (1073741824, None, None)]
    assert table.rows[1].out_of_place.time_us == 705156
    assert (table.ranks, table.transport, table.average_busbw, table.out_of_bounds) == (2, "socket", 0.76, 0)
    assert table.wrong is None and table.is_all_reduce


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[1,0]<stdout>:#  Rank  0", "#  Rank  0"),
        ("  [1,12]<stdout>:  8  2", "  8  2"),
        ("10: # size", "# size"),
        ("[default0]:     8     2", "     8     2"),
        ("           8             2     float", "           8             2     float"),
    ],
)
def test_launcher_prefixes(line: str, expected: str) -> None:
    assert strip_prefix(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "        ...",
        "# Avg bus bandwidth    : 84.0569",
        "compute-1:77184:77589 [0] NCCL INFO Channel 00/02 :    0   1   2",
        "           8             2     float     sum      -1    12.90    0.00    0.00    N/A    12.87    0.00    0.00",
        "  8  2  float  sum  -1  x  0.00  0.00  0  12.87  0.00  0.00  0",
    ],
)
def test_lines_that_are_not_rows(line: str) -> None:
    assert parse_row(line) is None


def test_na_wrong_column_is_a_row_without_a_count() -> None:
    row = parse_row(
        "      8     2     float     sum      -1    12.90    0.00    0.00    N/A    12.87    0.00    0.00    N/A"
    )
    assert row is not None and row.out_of_place.wrong is None and row.root == -1
