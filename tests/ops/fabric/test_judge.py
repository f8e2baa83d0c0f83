"""Verdicts of the fabric check on recorded nccl-tests outputs (../shared/reference) with the shipped floors,
and the pair logic that names a slow node."""

from __future__ import annotations

import json

import pytest

from config.catalog.fabric_floors import FabricFloor, fabric_floor
from ops.fabric.judge import judge, ring_pairs, slow_nodes, slow_pairs, waves
from ops.fabric.parse import parse
from tests.reference import reference_path


def _verdict(name: str, instance_type: str, *, expect_efa: bool = True):
    folder = reference_path("nccl-tests-outputs", name)
    case = json.loads((folder / "case.json").read_text())
    return case, judge(parse((folder / "output.txt").read_text()), fabric_floor(instance_type), expect_efa=expect_efa)


@pytest.mark.parametrize(
    ("name", "instance_type", "busbw"),
    [
        # AWS's own expected value: the floor (26.0) was set just under it (in-place 26.63 is the better column)
        ("p4d-x2-efa-allreduce-1G-pcluster-itest-nccl2.7.8-old-format", "p4d.24xlarge", 26.63),
        ("p4d-x2-efa-allreduce-1G-pcluster-itest-nccl2.19.4", "p4d.24xlarge", 45.81),
        ("p4de-x2-efa-allreduce-2G-slurm-rankprefix", "p4de.24xlarge", 76.86),
        ("p4de-x2-efa-allreduce-1G-no-footer-hpcworkshop", "p4de.24xlarge", 77.61),
        ("p5-x2-efa-allreduce-16G-slurm-rankprefix", "p5.48xlarge", None),
        ("p5-x2-eks-efa-allreduce-2G-mpirun-tag", "p5.48xlarge", None),
        ("p5-x2-eks-efa-allreduce-16G-tfblueprints", "p5.48xlarge", None),
        ("p5-x2-eks-efa-allreduce-2G-tfblueprints", "p5.48xlarge", None),
        ("p5-x2-batch-efa-allreduce-16G-mpirun-tag", "p5.48xlarge", None),
        # rows 32 B .. 8 GiB elided by the source: judged at the next row up, 16 GiB
        ("p5en-efa-allreduce-17G-elided", "p5en.48xlarge", 369.86),
        ("p4d-x2-eks-efa-allreduce-nccl2.9.9-old-format-full-log", "p4d.24xlarge", None),
    ],
)
def test_healthy_recorded_runs_pass_their_floor(name: str, instance_type: str, busbw: float | None) -> None:
    case, verdict = _verdict(name, instance_type)
    assert case["verdict_hint"].startswith("healthy")
    assert verdict.status == "pass", verdict.reason
    assert verdict.busbw is not None and verdict.busbw >= verdict.floor.min_busbw_gbps
    if busbw is not None:
        assert verdict.busbw == busbw


def test_socket_fallback_fails_an_efa_fleet_whatever_its_numbers() -> None:
    case, verdict = _verdict("g5.2xlarge-x2-1gpu-socket-no-efa-allreduce", "g5.2xlarge")
    assert case["verdict_hint"] == "degraded"
    assert (verdict.status, verdict.failed) == ("no-efa", True)
    assert "sockets" in verdict.reason


def test_single_rank_is_rejected_not_compared() -> None:
    case, verdict = _verdict("g5.2xlarge-1gpu-single-rank-busbw-zero", "p4d.24xlarge")
    assert case["verdict_hint"] == "broken"
    assert (verdict.status, verdict.failed, verdict.busbw) == ("invalid", False, None)
    assert "one rank" in verdict.reason


def test_scatter_table_is_not_judged_as_all_reduce() -> None:
    _, verdict = _verdict("p4d-x2-efa-scatter-debug-info-full-log", "p4d.24xlarge")
    assert verdict.status == "invalid" and "not an all-reduce" in verdict.reason


def test_unknown_type_is_measured_and_reported_without_floor() -> None:
    _, verdict = _verdict("g4dn.metal-x2-1gpu-eks-efa-allreduce-full-log", "g4dn.metal")
    assert fabric_floor("g4dn.metal") is None
    assert (verdict.status, verdict.failed, verdict.size, verdict.busbw) == ("no-floor", False, 1073741824, 3.12)


def test_a_run_that_stops_below_the_floor_size_is_invalid() -> None:
    _, verdict = _verdict("g5.2xlarge-x2-1gpu-socket-no-efa-allreduce", "p4d.24xlarge", expect_efa=False)
    assert verdict.status == "invalid" and "no row at 1 GiB" in verdict.reason


def test_below_floor_and_wrong_results() -> None:
    floor = FabricFloor("p4d.24xlarge", 1024, 20.0, "test")
    row = "        1024           256     float     sum      -1   100.00   10.24   19.20      {w}   100.00   10.24   19.20      0"
    slow = judge(parse(row.format(w=0)), floor, expect_efa=True)
    assert (slow.status, slow.busbw) == ("below-floor", 19.2) and slow.failed
    wrong = judge(parse(row.format(w=3)), floor, expect_efa=True)
    assert wrong.status == "wrong-results" and wrong.failed


def test_ring_pairs_waves_and_the_slow_node() -> None:
    nodes = ["i-1", "i-2", "i-3", "i-4", "i-5"]
    pairs = ring_pairs(nodes)
    assert pairs == [("i-1", "i-2"), ("i-2", "i-3"), ("i-3", "i-4"), ("i-4", "i-5"), ("i-5", "i-1")]
    for wave in waves(pairs):
        members = [n for i in wave for n in pairs[i]]
        assert len(members) == len(set(members))
    assert sorted(i for wave in waves(pairs) for i in wave) == list(range(5))
    # i-3 slow: both of its pairs are slow, its neighbours are slow in one pair only
    assert slow_nodes(pairs, [False, True, True, False, False]) == ["i-3"]
    assert slow_nodes(pairs, [False, True, False, False, False]) == []
    assert ring_pairs(["a", "b"]) == [("a", "b")] and slow_nodes([("a", "b")], [True]) == []


def test_pairs_without_floor_are_slow_relative_to_the_median() -> None:
    make = "  1024  256  float  sum  -1  1.0  1.0  {b}  0  1.0  1.0  {b}  0"
    verdicts = [judge(parse(make.format(b=b)), None, expect_efa=False) for b in (10.0, 9.5, 4.0)]
    assert slow_pairs(verdicts) == [False, False, True]
