# shellcheck shell=bash
# Sourced by the pipeline's steps that read an environment (post_deploy_check.sh, fabric_check.sh,
# ami_gate.sh); not run on its own. Each runs the project's Python with credentials of the environment's
# own account.
#
#   check_python <work dir> <package>...   prints a Python that has those packages: CHECK_PYTHON when set
#                                           (tests), else a throw-away virtual environment under <work dir>
#                                           with their pinned versions from requirements.txt
#   assume_role_profile <work dir> <profile> <role arn> <session name>
#                                           makes botocore assume the role from the CodeBuild container's
#                                           own credentials (EcsContainer) through a profile: no secret
#                                           passes through the script

check_python() {
    local work="$1"
    shift
    if [[ -n "${CHECK_PYTHON:-}" ]]; then
        echo "$CHECK_PYTHON"
        return
    fi
    local names
    names="$(IFS='|'; echo "$*")"
    python3 -m venv "$work/venv"
    grep -E "^(${names})==" requirements.txt >"$work/requirements.txt"
    "$work/venv/bin/pip" install --quiet --disable-pip-version-check -r "$work/requirements.txt" >&2
    echo "$work/venv/bin/python"
}

assume_role_profile() {
    local work="$1" profile="$2" role_arn="$3" session="$4"
    cat >"$work/aws-config" <<CONFIG
[profile ${profile}]
role_arn = ${role_arn}
credential_source = EcsContainer
role_session_name = ${session}
CONFIG
    export AWS_CONFIG_FILE="$work/aws-config" AWS_PROFILE="$profile"
    unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
}
