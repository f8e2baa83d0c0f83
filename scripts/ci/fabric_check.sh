#!/usr/bin/env bash
# The pipeline's fabric check of one environment (stacks/pipeline_stack.py), after
# its read-only post-deploy check, where config/pipeline/pipeline.yaml's
# fabric_check lists the environment:
#
#   scripts/ci/fabric_check.sh <env> <training fleet>...
#
# runs `gpu-platform job fabric-test --env <env> --fleet <fleet> --json
# --allow-idle` for each fleet, with credentials of the environment's own
# account. FABRIC_ROLE_ARN names the role to assume there,
# gpu-platform-<env>-fabric-check (its Fleets stack), which trusts only this
# step's project role in the pipeline's account. The CodeBuild project's own
# credentials are the source; botocore assumes the role through a profile and
# renews it during a long run, so no secret passes through this script.
# FABRIC_RUN_TIMEOUT_S: --timeout of each benchmark run (default 600).
#
# The exit status is the worst of the fleets': 0 every fleet reaches its floor
# or has fewer than two nodes (an idle fleet passes), 1 a fleet is below its
# floor, has wrong results, runs over sockets or has a slow pair, 2 a check
# could not run. Anything but 0 fails the pipeline action, and the next
# environment is not deployed.
#
# CHECK_PYTHON: a Python that already has boto3, pydantic, PyYAML, typer and
# rich (tests); by default the pinned versions of requirements.txt are
# installed into a throw-away virtual environment (no CDK, no Node.js).
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail

usage="usage: scripts/ci/fabric_check.sh <env> <training fleet>..."
env_name="${1:?$usage}"
shift
if (($# == 0)); then
    echo "$usage" >&2
    exit 2
fi
role_arn="${FABRIC_ROLE_ARN:?set FABRIC_ROLE_ARN to the fabric check role to assume in the account of the environment}"
run_timeout="${FABRIC_RUN_TIMEOUT_S:-600}"
cd "$(dirname "$0")/../.."

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=scripts/ci/role_env.sh
source scripts/ci/role_env.sh
python="$(check_python "$work" boto3 pydantic PyYAML typer rich)"
assume_role_profile "$work" fabric "$role_arn" "gpu-platform-fabric-${env_name}"

status=0
for fleet in "$@"; do
    echo "fabric check: ${env_name} ${fleet}" >&2
    code=0
    "$python" -m ops.cli job fabric-test --env "$env_name" --fleet "$fleet" --json --allow-idle \
        --timeout "$run_timeout" || code=$?
    echo "fabric check: ${env_name} ${fleet}: exit ${code}" >&2
    if ((code > status)); then
        status=$code
    fi
done
exit "$status"
