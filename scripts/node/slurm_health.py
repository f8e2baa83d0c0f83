#!/usr/bin/env python3
"""Slurm's Prolog= and HealthCheckProgram= on this node (slurm-health-check.sh): gpu_health.py once with node.env's
settings, no DCGM (seconds, before a job), no metric and no Auto Scaling action. On a bad verdict gpu_health.py
drains the node in Slurm with the reason (slurm_node.act_on_verdict) and this exits 1: slurmd then requeues the job
(SchedulerParameters=nohold_on_prolog_fail: not held) on other nodes.

    slurm_health.py [gpu_health.py flags]    # flags after the defaults: replayed outputs (tests, triage)

node.env (``NODE_ENV_FILE``) is read as data: ``EXPECTED_GPUS`` (required), ``EXPECTED_EFA``, ``HEALTH_DCGM``,
``HEALTH_EXTRA_FATAL_XIDS``. Exit 0 healthy; 1 unhealthy, or node.env without EXPECTED_GPUS (one line).
Python 3 standard library only (gpu_health.py imports boto3 only for the AWS actions this never runs).
"""

from __future__ import annotations

import os
import sys

import gpu_health  # beside this file; it imports slurm_node, which imports neither
from slurm_node import NODE_ENV_FILE, read_env_file


def main(extra: list[str]) -> int:
    if {"-h", "--help"} & set(extra):  # this usage, then the flags it passes on; nothing read, nothing run
        print(f"{__doc__}\ngpu_health.py's flags:\n{gpu_health.build_parser().format_help()}")
        return 0
    env = read_env_file(NODE_ENV_FILE)
    for key in ("EXPECTED_EFA", "HEALTH_DCGM", "HEALTH_EXTRA_FATAL_XIDS"):
        if key in env:
            os.environ.setdefault(key, env[key])
    if not env.get("EXPECTED_GPUS", "").isdigit():
        print(f"slurm_health: {NODE_ENV_FILE} has no EXPECTED_GPUS (the bootstrap writes it)", file=sys.stderr)
        return 1
    base = ["--once", "--expected-gpus", env["EXPECTED_GPUS"], "--no-metric", "--no-set-health", "--no-unit-check"]
    return gpu_health.main([*base, "--dcgm", "off", "--no-slurm-requeue", *extra])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
