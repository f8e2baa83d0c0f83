"""``gpu-platform job fabric-test`` against moto: nodes of the training group, SendCommand of the job
document to the right instances with the right parameters, the job output read from the job log streams,
the verdict, the metric, and the slow node named.

moto runs nothing on instances, and its recorded commands list every instance of the account when no
``Targets`` are given (moto 5.2.5 adds its target filter's matches, all instances for no filter), so the
requests are read as they leave the client. The nodes' job runner is played by ``FakeNodes``, hooked on
the session's events: it records each ``SendCommand`` request, and after it does what the runner would
(an Action=start writes the job's output to ``<job>/<instance-id>`` streams of the jobs log group in moto
Logs, rank 0's table on the lowest instance id, NCCL's transport line on every node) and it answers
``GetCommandInvocation`` with the runner's JSON line (moto returns no command output).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import typer
from typer.testing import CliRunner

from ops.fabric import command as fabric_command
from ops.fabric.command import bench_command, fabric_test, run_fabric_test
from tests.ops.fabric.fakes import DOCUMENT, FakeNodes, deploy_training, run
from tests.ops.helpers import config_dir
from tests.synth import SLURM_DIR


def _starts(fake: FakeNodes) -> list[dict[str, Any]]:
    return [c for c in fake.sent if c["Parameters"]["Action"] == ["start"]]


def test_healthy_fleet_runs_all_nodes_then_pairs_and_publishes_the_metric(aws, capsys, tmp_path) -> None:
    nodes = deploy_training(aws, 3)
    fake = FakeNodes(aws)
    code, report, err = run(aws, capsys, tmp_path)
    assert (code, err) == (0, ""), json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=1)
    starts = _starts(fake)
    # all three nodes first, then the three ring pairs: (0,1) and (1,2) share node 1, so waves
    assert sorted(starts[0]["InstanceIds"]) == [n["id"] for n in nodes]
    assert sorted(sorted(c["InstanceIds"]) for c in starts[1:]) == sorted(
        sorted([nodes[a]["id"], nodes[b]["id"]]) for a, b in ((0, 1), (1, 2), (2, 0))
    )
    first = starts[0]
    assert first["DocumentName"] == DOCUMENT
    assert first["Comment"] == f"gpu-platform job {first['Parameters']['JobId'][0]}"
    assert {k: v[0] for k, v in first["Parameters"].items()} == {
        "Action": "start",
        "JobId": "fabric-training-20260301T120000",
        "Nodes": "3",
        "ProcsPerNode": "8",  # the catalog's GPU count of p4d.24xlarge
        "RendezvousEndpoint": f"{nodes[0]['ip']}:29400",  # lowest instance id, jobs.rendezvous_port
        "WorkingDirectory": "/fsx",
        "MaxRestarts": "0",
        "Command": bench_command("1G", 20),
    }
    assert first["Parameters"]["Command"][0].startswith("/opt/gpu-platform/node/fabric/allreduce_bench.py ")
    for pair in starts[1:]:
        host = min(pair["InstanceIds"])
        ip = next(n["ip"] for n in nodes if n["id"] == host)
        assert pair["Parameters"]["RendezvousEndpoint"] == [f"{ip}:29400"] and pair["Parameters"]["Nodes"] == ["2"]
    statuses = [c for c in fake.sent if c["Parameters"]["Action"] == ["status"]]
    assert statuses and all(c["DocumentName"] == DOCUMENT for c in statuses)
    assert report["verdict"]["status"] == "pass" and report["verdict"]["busbw_gbps"] == 78.0
    assert report["verdict"]["floor"]["min_busbw_gbps"] == 26.0 and report["transport"] == "efa"
    assert report["ranks"] == 24 and len(report["rows"]) == 28
    assert [p["slow"] for p in report["pairs"]] == [False, False, False] and report["slow_nodes"] == []
    metrics = aws.client("cloudwatch").get_metric_statistics(
        Namespace="GpuPlatform/staging",
        MetricName="FabricBusBandwidth",
        Dimensions=[
            {"Name": "Environment", "Value": "staging"},
            {"Name": "Fleet", "Value": "training"},
            {"Name": "InstanceType", "Value": "p4d.24xlarge"},
        ],
        StartTime=datetime(2020, 1, 1, tzinfo=UTC),
        EndTime=datetime(2100, 1, 1, tzinfo=UTC),
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]
    assert [(d["Maximum"], d["Unit"]) for d in metrics] == [(78.0, "Gigabytes/Second")]


def test_a_slow_node_fails_the_check_and_is_named(aws, capsys, tmp_path) -> None:
    nodes = deploy_training(aws, 3)
    FakeNodes(aws, slow=nodes[1]["id"])
    code, report, _ = run(aws, capsys, tmp_path)
    assert code == 1
    assert report["verdict"]["status"] == "below-floor"  # the whole-fleet run includes the slow node
    assert [p["slow"] for p in report["pairs"]] == [True, True, False]
    assert report["slow_nodes"] == [nodes[1]["id"]]


def test_nodes_are_chosen_as_job_run_chooses_them(aws, capsys, tmp_path) -> None:
    """A node the group still lists InService but EC2 no longer runs is left out, as ``job run`` leaves it."""
    nodes = deploy_training(aws, 3)
    aws.client("ec2").stop_instances(InstanceIds=[nodes[0]["id"]])
    fake = FakeNodes(aws)
    code, report, err = run(aws, capsys, tmp_path, pairs=False)
    assert (code, err) == (0, "")
    (start,) = _starts(fake)
    assert sorted(start["InstanceIds"]) == [nodes[1]["id"], nodes[2]["id"]] == report["nodes"]
    assert start["Parameters"]["RendezvousEndpoint"] == [f"{nodes[1]['ip']}:29400"]
    assert start["TimeoutSeconds"] == 120  # ops/job/remote.py's delivery timeout


def test_fewer_than_two_nodes_cannot_run_unless_idle_is_allowed(aws, capsys, tmp_path) -> None:
    deploy_training(aws, 1)
    fake = FakeNodes(aws)
    code, _, err = run(aws, capsys, tmp_path)
    assert code == 2 and "1 InService, healthy node(s)" in err and "fix:" in err and len(err.splitlines()) == 1
    assert run(aws, capsys, tmp_path, allow_idle=True)[0] == 0
    assert fake.sent == []


def test_a_failed_benchmark_job_is_one_line(aws, capsys, tmp_path) -> None:
    deploy_training(aws, 2)
    FakeNodes(aws, fail=True)
    code, report, err = run(aws, capsys, tmp_path)
    assert (code, report) == (2, {})
    assert err.startswith("fabric-test: the benchmark failed on fabric-training-20260301T120000/i-")
    assert "exit 1" in err and len(err.splitlines()) == 1


def test_a_node_that_cannot_start_the_benchmark_stops_it_on_the_others(aws, capsys, tmp_path) -> None:
    """Like `job run`: the nodes that started would wait at the rendezvous for the missing one, GPUs held."""
    nodes = deploy_training(aws, 3)
    broken = nodes[1]["id"]
    fake = FakeNodes(aws, refuse_start=broken)
    code, report, err = run(aws, capsys, tmp_path)
    assert (code, report) == (2, {})
    job = "fabric-training-20260301T120000"
    assert err == (
        f"fabric-test: {broken}: the job document failed (Failed (exit 1): runner: /fsx is not a Lustre mount (lustre-mount.service "
        f"failed)); stopped {job} where it had started; fix: see its command output in SSM\n"
    )
    (start,) = _starts(fake)  # the whole fleet first: no pair was started after it failed
    stops = [c for c in fake.sent if c["Parameters"]["Action"] == ["stop"]]
    # Only where it started: a node that failed (perhaps gone) in the same call could fail the whole stop.
    assert [(c["Parameters"]["JobId"], sorted(c["InstanceIds"])) for c in stops] == [
        ([job], sorted(n["id"] for n in nodes if n["id"] != broken))
    ]
    assert fake.sent.index(start) < fake.sent.index(stops[0])


def test_a_start_error_with_its_own_fix_keeps_the_line_in_order(aws, capsys, tmp_path) -> None:
    nodes = deploy_training(aws, 2)
    fake = FakeNodes(aws, refuse_start=nodes[0]["id"])
    fake.start_error = "this agent cannot pass parameters as environment variables; fix: use SSM Agent 3.3.2746.0"
    code, _, err = run(aws, capsys, tmp_path)
    assert code == 2
    assert err.rstrip("\n").endswith(
        "(Failed (exit 1): this agent cannot pass parameters as environment variables; fix: use SSM Agent "
        "3.3.2746.0); stopped fabric-training-20260301T120000 where it had started; fix: see its command output in SSM"
    )


def test_an_inference_fleet_is_refused(aws, capsys, tmp_path) -> None:
    code = run_fabric_test("staging", "inference", config_dir=config_dir(tmp_path, "staging"), session=aws)
    err = capsys.readouterr().err
    assert code == 2 and "'inference' is not a training fleet; fix: use one of training" in err


def test_a_slurm_fleet_is_refused_naming_the_file_it_was_read_from(aws, capsys) -> None:
    code = run_fabric_test("hpc", "training", config_dir=SLURM_DIR, session=aws)
    err = capsys.readouterr().err
    assert code == 2 and "hpc.yaml: fleets: 'training' is a Slurm fleet (test its fabric as a Slurm job" in err


def test_through_a_typer_app_with_tables(aws, tmp_path, monkeypatch) -> None:
    """The command function as the ``job`` app registers it: options, rich output, exit code."""
    nodes = deploy_training(aws, 2)
    FakeNodes(aws)
    monkeypatch.setattr(fabric_command, "open_session", lambda region: aws)
    app = typer.Typer()
    app.command("fabric-test")(fabric_test)
    app.command("noop")(lambda: None)  # two commands: the name is a subcommand, as under `job`
    folder = config_dir(tmp_path, "staging")
    result = CliRunner().invoke(
        app,
        ["fabric-test", "--env", "staging", "--fleet", "training", "--config-dir", str(folder)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "all-reduce across 2 nodes" in result.output and "1 GiB" in result.output
    assert f"{nodes[0]['id']} + {nodes[1]['id']}" in result.output
    assert "pass: 78.00 GB/s at 1 GiB >= 26 GB/s" in result.output
    assert "with two nodes the check cannot tell" not in result.output


def test_fabric_test_is_a_job_command_of_gpu_platform() -> None:
    from typer.testing import CliRunner

    from ops.cli import app as gpu_platform

    result = CliRunner().invoke(gpu_platform, ["job", "fabric-test", "--help"])
    assert result.exit_code == 0, result.output
    assert "against its floor" in result.output and "--allow-idle" in result.output
