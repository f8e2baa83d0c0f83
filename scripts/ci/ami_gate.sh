#!/usr/bin/env bash
# The pipeline's AMI gate of one environment (stacks/pipeline_stack.py), a step
# before its deploy (after its manual approval, if it has one), where
# config/pipeline/pipeline.yaml's ami_gate lists the environment:
#
#   scripts/ci/ami_gate.sh <env> <tested env>
#
# runs scripts/ci/ami_gate.py check <env> --tested-in <tested env> with
# credentials of the environment's own account: the environment's golden AMI
# (its AMI parameter) must have the name of the AMI the fabric check of
# <tested env> ran on, TESTED_AMI_NAME (that step's exported variable).
# GATE_ROLE_ARN names the role to assume there, gpu-platform-<env>-ami-gate
# (its Fleets stack), which trusts only this step's project role in the
# pipeline's account. The CodeBuild project's own credentials are the source;
# botocore assumes the role through a profile, so no secret passes through
# this script.
#
# The exit status is the gate's: 0 the AMI is the one tested, 1 it is not (or
# nothing was tested, or the parameter is missing), 2 the gate could not run.
# Anything but 0 fails the pipeline action, and the environment is not
# deployed.
#
# CHECK_PYTHON: a Python that already has boto3, pydantic and PyYAML (tests);
# by default the pinned versions of requirements.txt are installed into a
# throw-away virtual environment (no CDK, no Node.js).
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail

usage="usage: scripts/ci/ami_gate.sh <env> <tested env>"
if (($# != 2)); then
    echo "$usage" >&2
    exit 2
fi
env_name="$1"
tested_in="$2"
role_arn="${GATE_ROLE_ARN:?set GATE_ROLE_ARN to the AMI gate role to assume in the account of the environment}"
cd "$(dirname "$0")/../.."

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=scripts/ci/role_env.sh
source scripts/ci/role_env.sh
python="$(check_python "$work" boto3 pydantic PyYAML)"
assume_role_profile "$work" gate "$role_arn" "gpu-platform-ami-gate-${env_name}"

status=0
"$python" scripts/ci/ami_gate.py check "$env_name" --tested-in "$tested_in" || status=$?
exit "$status"
