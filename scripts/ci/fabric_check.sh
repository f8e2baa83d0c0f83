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
# When every fleet passed, it prints the AMI their nodes were booted from
# (scripts/ci/ami_gate.py tested: the name, or "not tested: <why>" when no fleet
# had two nodes) and writes that line to FABRIC_AMI_FILE when set: the step
# exports it as FABRIC_AMI_NAME, which the AMI gate of a later environment
# compares with that environment's golden AMI. Fleets whose nodes ran on AMIs
# of different names exit 2.
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
ami_file="${FABRIC_AMI_FILE:-}"
if [[ -n "$ami_file" ]]; then
    ami_file="$(realpath -m -- "$ami_file")"  # relative to where the step runs, before the cd below
fi
cd "$(dirname "$0")/../.."

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=scripts/ci/role_env.sh
source scripts/ci/role_env.sh
python="$(check_python "$work" boto3 pydantic PyYAML typer rich)"
assume_role_profile "$work" fabric "$role_arn" "gpu-platform-fabric-${env_name}"

status=0
reports=()
for fleet in "$@"; do
    echo "fabric check: ${env_name} ${fleet}" >&2
    code=0
    report="${work}/report-${#reports[@]}.json"
    "$python" -m ops.cli job fabric-test --env "$env_name" --fleet "$fleet" --json --allow-idle \
        --timeout "$run_timeout" >"$report" || code=$?
    cat "$report"  # the JSON report in the build log; empty for a fleet with fewer than two nodes
    reports+=("$report")
    echo "fabric check: ${env_name} ${fleet}: exit ${code}" >&2
    if ((code > status)); then
        status=$code
    fi
done
if ((status == 0)); then
    tested="$("$python" scripts/ci/ami_gate.py tested "${reports[@]}")" || status=$?
fi
if ((status == 0)); then
    echo "fabric check: ${env_name}: tested AMI: ${tested}" >&2
    if [[ -n "$ami_file" ]]; then
        printf '%s\n' "$tested" >"$ami_file"
    fi
fi
exit "$status"
