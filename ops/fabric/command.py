"""``gpu-platform job fabric-test --env E --fleet F``: all-reduce bus bandwidth across a training fleet.

Runs ``scripts/node/fabric/allreduce_bench.py`` as a job (the job document, torchrun) first on every chosen
node, then on each pair of a ring of them ((0,1), (1,2), ..., (n-1,0); pairs without a shared node at the
same time), reads rank 0's table from the job log streams, judges it against the instance type's floor
(``config/catalog/fabric_floors.csv``), publishes ``FabricBusBandwidth`` (GB/s; dimensions Environment,
Fleet, InstanceType) to the environment's namespace and names a node that is slow in both its pairs. The report
names the AMI the nodes were booted from (id and name); nodes of different AMIs are refused (exit 2).

Exit codes: 0 the fabric reaches its floor (or there is no floor: reported), 1 below the floor, wrong
results, sockets instead of EFA, or a slow pair; 2 the check could not run (config, credentials, fewer
than two nodes, a job that failed or timed out, an output that does not measure the fabric).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import boto3
import typer
from botocore.exceptions import BotoCoreError, ClientError

from config.catalog import CatalogError, get_instance_type
from config.catalog.fabric_floors import fabric_floor
from config.errors import ConfigError
from config.fleets.fleet import FleetRole as Role
from config.loader import CONFIG_DIR, display_path, load_environment
from config.naming import ResourceNames
from ops.args import ArgumentError
from ops.fabric import jobs
from ops.fabric.ami import node_ami
from ops.fabric.arguments import check_fabric_arguments
from ops.fabric.judge import Verdict, judge, ring_pairs, slow_nodes, slow_pairs, waves
from ops.fabric.parse import Table, parse
from ops.fabric.report import FabricResult, print_json, print_tables
from ops.job.context import JobContext, JobError
from ops.job.nodes import Node
from ops.preflight.aws import Aws
from ops.status_command import aws_error_line

#: The benchmark on the node (scripts/node is unpacked at /opt/gpu-platform/node): torchrun runs it by path.
BENCH_PATH = "/opt/gpu-platform/node/fabric/allreduce_bench.py"
METRIC_NAME = "FabricBusBandwidth"


def bench_command(max_bytes: str, iters: int) -> str:
    """The job document's ``Command``: one string the runner ``shlex.split``s after torchrun's options."""
    return shlex.join([BENCH_PATH, "--min-bytes", "8", "--max-bytes", max_bytes, "--iters", str(iters)])


def open_session(region: str) -> Any:
    return boto3.session.Session(region_name=region)


def _table(outputs: dict[str, str]) -> Table:
    """Rank 0's table: the stream (node) whose output has rows; the others hold NCCL lines only."""
    tables = [parse(text) for text in outputs.values()]
    with_rows = [t for t in tables if t.rows]
    chosen = with_rows[0] if with_rows else (tables[0] if tables else Table())
    for other in tables:  # every node logs its own transport: one socket node makes the run socket
        if other.transport == "socket" or (other.transport and not chosen.transport):
            chosen.transport = other.transport
    return chosen


def measure(
    context: JobContext, run_id: str, groups: list[list[Node]], command: str, gpus: int, timeout_s: float
) -> list[Table]:
    """Start one job per node group (groups run at the same time), wait for all, read each one's table."""
    runs = [(f"{run_id}-{i}" if len(groups) > 1 else run_id, nodes) for i, nodes in enumerate(groups)]
    started: list[tuple[str, list[Node]]] = []
    for job_id, nodes in runs:
        try:
            jobs.start(context, job_id, nodes, command=command, procs_per_node=gpus)
        except jobs.StartFailed as err:  # where it did start, torchrun would wait at the rendezvous for this node
            stopping = [(j, n) for j, n in [*started, (job_id, err.started)] if n]
            unsent = jobs.stop(context, stopping)
            if unsent:
                stopped = f"could not stop {'; '.join(unsent)}"
            elif stopping:
                stopped = f"stopped {', '.join(j for j, _ in stopping)} where it had started"
            else:
                stopped = "it started nowhere"
            what, sep, fix = str(err).rpartition("; fix: ")
            what, fix = (what, fix) if sep else (str(err), "")
            raise JobError(f"{what}; {stopped}" + (f"; fix: {fix}" if fix else ""), code=err.code) from err
        started.append((job_id, nodes))
    states = jobs.wait(context, runs, timeout_s=timeout_s)
    failed = [
        f"{key} ({s.get('result')}, exit {s.get('exit_code')})"
        for key, s in states.items()
        if s.get("state") == "failed"
    ]
    if failed:
        raise JobError(f"the benchmark failed on {', '.join(failed)}; fix: read the job log (gpu-platform job logs)")
    return [_table(jobs.output(context, job_id, nodes)) for job_id, nodes in runs]


def run_fabric_test(
    env: str,
    fleet: str,
    *,
    nodes: int | None = None,
    max_bytes: str = "1G",
    iters: int = 20,
    pairs: bool = True,
    timeout_s: float = 1800.0,
    allow_idle: bool = False,
    json_out: bool = False,
    config_dir: Path | None = None,
    session: Any = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """The check; the exit code as in the module docstring."""
    try:
        folder = config_dir or CONFIG_DIR
        environment = load_environment(env, folder)
        spec = _training_fleet(environment, display_path(folder / f"{env}.yaml"), fleet)
        aws = Aws(session or open_session(environment.region))
        context = JobContext(environment, aws, display_path(folder / f"{env}.yaml"))
        chosen = jobs.fleet_nodes(context, spec)[: nodes or None]
        if len(chosen) < 2:
            line = f"fleet {fleet}: {len(chosen)} InService, healthy node(s); the fabric check needs two or more"
            print(f"{line}; fix: scale the fleet to at least 2 (or run it when training runs)", file=sys.stderr)
            return 0 if allow_idle else 2
        run_id = f"fabric-{fleet}-{now().strftime('%Y%m%dT%H%M%S')}"
        result = _measure_fleet(context, spec, chosen, run_id, bench_command(max_bytes, iters), timeout_s, pairs)
        if result.verdict.busbw is not None:
            names = ResourceNames.of(environment)
            publish(aws, names, fleet, ",".join(result.instance_types), result.verdict.busbw)
    except (ConfigError, CatalogError) as err:
        print(err, file=sys.stderr)
        return 2
    except JobError as err:
        print(f"fabric-test: {err}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as err:
        print(aws_error_line(err), file=sys.stderr)
        return 2
    print_json(result) if json_out else print_tables(result)
    return result.exit_code


def _training_fleet(environment: Any, shown: str, fleet: str) -> Any:
    """The training fleet ``fleet`` on an Auto Scaling group (a Slurm fleet's fabric is tested as a Slurm job)."""
    spec = next((f for f in environment.fleets if f.name == fleet), None)
    if spec is None or spec.role is not Role.TRAINING or spec.scheduler.value == "slurm":
        known = ", ".join(
            f.name for f in environment.fleets if f.role is Role.TRAINING and f.scheduler.value != "slurm"
        )
        slurm = spec is not None and spec.scheduler.value == "slurm"
        what = (
            "is a Slurm fleet (test its fabric as a Slurm job: sbatch nccl-tests)"
            if slurm
            else "is not a training fleet"
        )
        raise ConfigError([f"{shown}: fleets: {fleet!r} {what}; fix: use one of {known or 'none'}"])
    return spec


def _measure_fleet(
    context: JobContext, spec: Any, chosen: list[Node], run_id: str, command: str, timeout_s: float, pairs: bool
) -> FabricResult:
    """The whole fleet's run, then each pair of a ring of its nodes (in waves), judged against the floor."""
    fleet = spec.name
    ami = node_ami(context.aws, [n.instance_id for n in chosen], context.names.asg_name(fleet))
    instance_types = sorted({n.instance_type for n in chosen})
    floor = min(
        (f for f in (fabric_floor(t) for t in instance_types) if f is not None),
        key=lambda f: f.min_busbw_gbps,
        default=None,
    )
    gpus = min(get_instance_type(t).gpu_count for t in instance_types)
    whole = measure(context, run_id, [chosen], command, gpus, timeout_s)[0]
    pair_list = ring_pairs([n.instance_id for n in chosen]) if pairs else []
    pair_verdicts = _pair_verdicts(context, chosen, pair_list, run_id, command, gpus, timeout_s, floor, spec.efa)
    slow = slow_pairs(pair_verdicts)
    return FabricResult(
        env=context.environment.name,
        fleet=fleet,
        instance_types=instance_types,
        nodes=[n.instance_id for n in chosen],
        ami=ami,
        run_id=run_id,
        table=whole,
        verdict=judge(whole, floor, expect_efa=spec.efa),
        pairs=pair_list,
        pair_verdicts=pair_verdicts,
        slow_pairs=slow,
        slow_nodes=slow_nodes(pair_list, slow),
    )


def _pair_verdicts(
    context: JobContext,
    chosen: list[Node],
    pair_list: list[tuple[str, str]],
    run_id: str,
    command: str,
    gpus: int,
    timeout_s: float,
    floor: Any,
    expect_efa: bool,
) -> list[Verdict]:
    by_id = {n.instance_id: n for n in chosen}
    verdicts: list[Verdict] = [Verdict("invalid", "not run")] * len(pair_list)
    for wave in waves(pair_list):
        groups = [[by_id[a], by_id[b]] for a, b in (pair_list[i] for i in wave)]
        tables = measure(context, f"{run_id}-w{len(wave)}x{wave[0]}", groups, command, gpus, timeout_s)
        for index, table in zip(wave, tables, strict=True):
            verdicts[index] = judge(table, floor, expect_efa=expect_efa)
    return verdicts


def publish(aws: Aws, names: ResourceNames, fleet: str, instance_type: str, busbw: float) -> None:
    aws.client("cloudwatch").put_metric_data(
        Namespace=names.metrics_namespace,
        MetricData=[
            {
                "MetricName": METRIC_NAME,
                "Dimensions": [
                    {"Name": "Environment", "Value": names.env},
                    {"Name": "Fleet", "Value": fleet},
                    {"Name": "InstanceType", "Value": instance_type},
                ],
                "Value": busbw,
                "Unit": "Gigabytes/Second",
            }
        ],
    )


def fabric_test(
    env: Annotated[str, typer.Option("--env", "-e", help="environment: the name of a config/<env>.yaml")],
    fleet: Annotated[str, typer.Option("--fleet", "-f", help="a training fleet of the environment")],
    nodes: Annotated[
        int | None, typer.Option("--nodes", "-n", min=2, help="use this many nodes (default: all)")
    ] = None,
    max_bytes: Annotated[str, typer.Option("--max-bytes", help="largest message, e.g. 1G, 16G")] = "1G",
    iters: Annotated[int, typer.Option("--iters", min=1, help="timed all-reduces per size")] = 20,
    pairs: Annotated[
        bool, typer.Option("--pairs/--no-pairs", help="also test each pair of a ring of the nodes")
    ] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for each run")] = 1800.0,
    allow_idle: Annotated[
        bool, typer.Option("--allow-idle", help="exit 0, not 2, when the fleet has fewer than two nodes")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON document on stdout")] = False,
    config_dir: Annotated[Path, typer.Option("--config-dir", help="folder of the <env>.yaml files")] = CONFIG_DIR,
) -> None:
    """All-reduce bus bandwidth across a training fleet over EFA, against its floor (needs credentials)."""
    try:
        check_fabric_arguments(env, fleet, max_bytes, timeout, config_dir or CONFIG_DIR)
    except ArgumentError as err:
        print(f"fabric-test: {err}", file=sys.stderr)
        raise typer.Exit(2) from None
    raise typer.Exit(
        run_fabric_test(
            env,
            fleet,
            nodes=nodes,
            max_bytes=max_bytes,
            iters=iters,
            pairs=pairs,
            timeout_s=timeout,
            allow_idle=allow_idle,
            json_out=json_out,
            config_dir=config_dir,
        )
    )


__all__ = ["BENCH_PATH", "METRIC_NAME", "bench_command", "fabric_test", "run_fabric_test"]
