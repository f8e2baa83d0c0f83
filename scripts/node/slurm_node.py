#!/usr/bin/env python3
"""This node's side of Slurm (AWS PCS runs the controller): the node's Slurm name, a drain with the reason,
and the requeue of the jobs running on the node (the health check Slurm runs is slurm_health.py).

    slurm_node.py drain --reason TEXT [--node N]  # scontrol update nodename=N state=drain reason=TEXT
    slurm_node.py requeue [--node N]              # scontrol requeue of the jobs running on N
    slurm_node.py name                            # the node's Slurm name; exit 1 when it is not under Slurm

The node's Slurm name: ``--node``, else ``SLURMD_NODENAME`` (slurmd sets it for its Prolog and
HealthCheckProgram), else ``SLURM_NODE_NAME`` (node.env), else the node whose NodeHostName or NodeAddr is
this host (``scontrol --oneliner show node``). No Slurm configuration (``SLURM_CONF``, PCS's configless
``/run/slurm/conf/slurm.conf``, ``/etc/slurm/slurm.conf``), no ``scontrol``, or no node for this host: not
under Slurm.

Exit 0 done; 1 Slurm refused or the node is not under Slurm (one line); 2 bad usage.
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

SCONTROL = os.environ.get("SCONTROL_BIN") or "scontrol"
SQUEUE = os.environ.get("SQUEUE_BIN") or "squeue"
NODE_ENV_FILE = os.environ.get("NODE_ENV_FILE") or "/etc/gpu-platform/node.env"
NODE_NAME_KEY = "SLURM_NODE_NAME"
SLURM_CONFIGS = ("/run/slurm/conf/slurm.conf", "/etc/slurm/slurm.conf")  # configless (PCS), then classic
REASON_MAX = 200
TIMEOUT_S = 30.0


class SlurmError(Exception):
    """One line: what Slurm (or its absence) said."""


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: no Slurm on this node") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(argv[:3])} did not answer within {TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise SlurmError(f"{' '.join(argv[:3])} exited {done.returncode}: {said[-1] if said else 'no output'}")
    return done.stdout


def read_env_file(path: str) -> dict[str, str]:
    """node.env's KEY=value lines, as data (never sourced); a missing file is empty."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """A Slurm configuration is on this node: ``SLURM_CONF``, PCS's configless cache, or the classic path."""
    env = os.environ if environ is None else environ
    return any(Path(path).is_file() for path in (env.get("SLURM_CONF") or "", *SLURM_CONFIGS) if path)


def _this_host() -> set[str]:
    name = socket.gethostname()
    names = {name, name.split(".")[0], socket.getfqdn()}
    with contextlib.suppress(OSError):
        names.add(socket.gethostbyname(name))
    return names


def _node_fields(line: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def node_name(given: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The node's Slurm name (see the module's doc); SlurmError when none is found."""
    env = os.environ if environ is None else environ
    name = (
        given or env.get("SLURMD_NODENAME") or env.get(NODE_NAME_KEY) or read_env_file(NODE_ENV_FILE).get(NODE_NAME_KEY)
    )
    if name:
        return name
    host = _this_host()
    for line in _run([SCONTROL, "--oneliner", "show", "node"]).splitlines():
        fields = _node_fields(line)
        if {fields.get("NodeHostName"), fields.get("NodeAddr")} & host:
            return fields["NodeName"]
    raise SlurmError(f"no Slurm node has this host's name or address ({', '.join(sorted(host))})")


def reason_text(text: str) -> str:
    """One line of at most REASON_MAX characters: what ``sinfo -R`` shows."""
    line = " ".join(text.split())
    return line if len(line) <= REASON_MAX else line[: REASON_MAX - 3] + "..."


def drain(node: str, reason: str) -> None:
    """No new job starts on ``node``; the running ones go on. The reason is kept until the node is resumed."""
    _run([SCONTROL, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason_text(reason)}"])


def running_jobs(node: str) -> list[str]:
    out = _run([SQUEUE, "--noheader", f"--nodelist={node}", "--states=RUNNING,CONFIGURING", "--format=%A"])
    return [job for job in out.split() if job.isdigit()]


def requeue(node: str) -> list[str]:
    """Requeue every job running on ``node`` (Slurm stops it: SIGTERM, which the checkpoint contract answers
    with a checkpoint, then SIGKILL after KillWait); it starts again, from its newest checkpoint, elsewhere."""
    jobs = running_jobs(node)
    if jobs:
        _run([SCONTROL, "requeue", ",".join(jobs)])
    return jobs


def leave(node: str, reason: str, checkpoint: Callable[[], int] | None = None) -> list[str]:
    """Drain first (nothing new lands here), checkpoint the running jobs (the contract: pid files and
    SIGUSR1), then requeue them. Returns the requeued job ids."""
    drain(node, reason)
    if checkpoint is not None:
        checkpoint()
    return requeue(node)


# -- the health check's side (gpu_health.py) --


def add_slurm_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Slurm (a bad verdict drains the node in Slurm with the reason)")
    group.add_argument("--slurm-node", default="auto", help="the node's Slurm name; auto: find it; off: never")
    group.add_argument(
        "--slurm-requeue",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the drain, requeue the jobs running on the node (they checkpoint on SIGTERM)",
    )


def act_on_verdict(args: argparse.Namespace, report: Any, log: Any) -> None:
    """On a bad verdict, drain the node in Slurm with the reason (and requeue its jobs); not under Slurm: nothing."""
    if report.healthy or args.slurm_node == "off" or (args.slurm_node == "auto" and not configured()):
        return
    try:
        node = node_name(None if args.slurm_node == "auto" else args.slurm_node)
    except SlurmError as err:
        log.info("not draining in Slurm: %s", err)
        return
    reason = f"gpu-health {','.join(report.reason_classes)}: {'; '.join(report.reasons)}"
    try:
        drain(node, reason)
        log.warning("drained Slurm node %s: %s", node, reason_text(reason))
        if args.slurm_requeue:
            log.warning("requeued Slurm jobs on %s: %s", node, ", ".join(requeue(node)) or "none running")
    except SlurmError as err:
        log.error("Slurm: %s", err)


# -- the command line --


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="This node's side of Slurm: drain, requeue, name.")
    sub = parser.add_subparsers(dest="command", required=True)
    drain_cmd = sub.add_parser("drain", help="drain the node with a reason")
    drain_cmd.add_argument("--reason", required=True)
    for command in (drain_cmd, sub.add_parser("requeue", help="requeue the jobs running on the node")):
        command.add_argument("--node", help="default: this node's Slurm name")
    sub.add_parser("name", help="print the node's Slurm name")
    args = parser.parse_args(argv)
    try:
        node = node_name(getattr(args, "node", None))
        if args.command == "drain":
            drain(node, args.reason)
        elif args.command == "requeue":
            print(" ".join(requeue(node)))
        else:
            print(node)
    except SlurmError as err:
        print(f"slurm_node: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
