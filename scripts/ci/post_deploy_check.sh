#!/usr/bin/env bash
# The pipeline's post-deploy check of one environment (stacks/pipeline_stack.py):
#
#   scripts/ci/post_deploy_check.sh <env>
#
# runs scripts/check_environment.py <env> --json with credentials of the
# environment's own account. CHECK_ROLE_ARN names the role to assume there: the
# CDK bootstrap's lookup role (ReadOnlyAccess, kms:Decrypt denied), which
# `cdk bootstrap --trust <tooling account>` lets the pipeline's account assume.
# The CodeBuild project's own credentials are the source; botocore assumes the
# role through a profile, so no secret passes through this script.
#
# The exit status is the check's: 0 every check passed, 1 a check failed,
# 2 the checks could not run (wrong account, access denied, ...). Anything but 0
# fails the pipeline action, and the next environment is not deployed.
#
# CHECK_PYTHON: a Python that already has boto3, pydantic and PyYAML (tests);
# by default the pinned versions of requirements.txt are installed into a
# throw-away virtual environment (the check needs neither the CDK nor Node.js).
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail

env_name="${1:?usage: scripts/ci/post_deploy_check.sh <env>}"
role_arn="${CHECK_ROLE_ARN:?set CHECK_ROLE_ARN to the read-only role to assume in the account of the environment}"
cd "$(dirname "$0")/../.."

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=scripts/ci/role_env.sh
source scripts/ci/role_env.sh
python="$(check_python "$work" boto3 pydantic PyYAML)"
assume_role_profile "$work" check "$role_arn" "gpu-platform-check-${env_name}"

status=0
"$python" scripts/check_environment.py "$env_name" --json || status=$?
exit "$status"
