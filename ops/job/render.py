"""What the job commands print: the plan and progress of ``run`` (on stderr), the tables of ``list`` and
``status``/``cancel`` (on stdout)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ops.job.history import Launch
from ops.job.launch import Plan
from ops.job.remote import Invocation

_STATE_STYLE = {"active": "green", "activating": "green", "inactive": "blue", "failed": "red", "unknown": "yellow"}
_SLURM_STYLE = {
    "RUNNING": "green",
    "COMPLETED": "green",
    "PENDING": "yellow",
    "REQUEUED": "yellow",
    "CANCELLED": "blue",
}


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def print_plan(plan: Plan) -> None:
    console = _err()
    p = plan.parameters
    verb = "resuming" if plan.resumed else "starting"
    first = plan.selection.nodes[0]
    console.print(
        f"{verb} job {plan.job_id} on {p['Nodes']} node(s) of {plan.selection.fleet.name} ({first.instance_type}, "
        f"{p['ProcsPerNode']} processes each), rendezvous {p['RendezvousEndpoint']}",
        markup=False,
    )
    console.print(f"  working directory {p['WorkingDirectory']}, command: {p['Command']}", markup=False)
    for instance_id, why in plan.selection.skipped:
        console.print(f"  left out {instance_id}: {why}", markup=False)


@contextmanager
def progress(plan: Plan) -> Iterator[Callable[[Invocation], None]]:
    """A bar of the nodes whose start has finished; yields the callback ``remote.wait`` calls on each change."""
    console = _err()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(f"start {plan.job_id}", total=len(plan.instance_ids))

        def on_change(invocation: Invocation) -> None:
            if invocation.done:
                bar.advance(task)
                state = (invocation.report or {}).get("state", "-")
                colour = "green" if invocation.status == "Success" else "red"
                bar.console.print(f"  {invocation.instance_id} [{colour}]{invocation.status}[/] unit {state}")

        yield on_change


def jobs_table(jobs: dict[str, list[Launch]]) -> None:
    table = Table(title="jobs", box=box.SIMPLE_HEAD)
    for column in ("job", "started at (UTC)", "nodes", "launches", "start", "command"):
        table.add_column(column, overflow="fold")
    for runs in jobs.values():
        newest = runs[0]
        when = newest.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(newest.job_id, when, str(newest.nodes), str(len(runs)), newest.status, escape(newest.command))
    Console(highlight=False).print(table if jobs else "no jobs")


def states_table(job: str, reports: dict[str, dict[str, Any]]) -> None:
    table = Table(title=f"job {job}", box=box.SIMPLE_HEAD)
    for column in ("instance", "state", "result", "exit code", "started at"):
        table.add_column(column, overflow="fold")
    for instance_id, r in reports.items():
        style = _STATE_STYLE.get(str(r.get("state")), "")
        exit_code = "-" if r.get("exit_code") is None else str(r["exit_code"])
        table.add_row(
            instance_id,
            f"[{style}]{r.get('state')}[/]" if style else str(r.get("state")),
            escape(str(r.get("result") or "-")),
            exit_code,
            str(r.get("started_at") or "-"),
        )
    Console(highlight=False).print(table)


def slurm_table(report: dict[str, Any]) -> None:
    """A Slurm job (ops/job/slurm.py ``report``): its nodes, state and exit code as a node's row on the SSM path,
    then its elapsed time, GPUs and GPU-hours from accounting."""
    title = f"job {report['job']} ({report['name']}, {report['user']}, account {report['account']})"
    table = Table(title=title, box=box.SIMPLE_HEAD)
    for column in ("nodes", "state", "exit code", "started at (UTC)", "elapsed", "GPUs", "GPU-hours"):
        table.add_column(column, overflow="fold")
    started = report.get("started_at")
    table.add_row(
        escape(report["nodes"] or "-"),
        f"[{_SLURM_STYLE.get(report['state'], 'red')}]{report['state']}[/]",
        "-" if report.get("exit_code") is None else str(report["exit_code"]),
        datetime.fromisoformat(started).strftime("%Y-%m-%d %H:%M:%S") if started else "-",
        report["elapsed"],
        str(report["gpus"]),
        f"{report['gpu_hours']:.2f}",
    )
    Console(highlight=False).print(table)
