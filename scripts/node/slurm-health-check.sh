#!/usr/bin/env bash
# Slurm's Prolog= (before each job on this node) and HealthCheckProgram= (every HealthCheckInterval): the
# platform's GPU health verdict (gpu_health.py once, without DCGM: seconds before a job), and on a bad
# verdict a drain of this node with the reason (scontrol update nodename=<this node> state=drain
# reason="gpu-health <classes>: <reasons>") and exit 1, which makes slurmd requeue the job (not held with
# SchedulerParameters=nohold_on_prolog_fail) on other nodes. The node's Slurm name is SLURMD_NODENAME,
# which slurmd sets. Flags given are passed to gpu_health.py (replayed outputs: tests, triage).
#
# Environment: NODE_ENV_FILE (/etc/gpu-platform/node.env: EXPECTED_GPUS, EXPECTED_EFA, HEALTH_*),
# PYTHON_BIN (/usr/bin/python3). Slurm's commands are looked up on PATH, then under PCS's Slurm prefix
# (/opt/aws/pcs/scheduler/slurm-*/bin): slurmd gives its scripts a bare environment.
#
# Exit status: 0 healthy; 1 unhealthy (drained when Slurm answered), or node.env without EXPECTED_GPUS.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail

here="$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")"
PATH="${PATH:-/usr/sbin:/usr/bin:/sbin:/bin}"
for bin in /opt/aws/pcs/scheduler/slurm-*/bin; do
  [[ -d "$bin" ]] && PATH="${PATH}:${bin}"
done
export PATH
exec "${PYTHON_BIN:-/usr/bin/python3}" "${here}/slurm_health.py" "$@"
