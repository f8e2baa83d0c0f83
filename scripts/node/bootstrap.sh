#!/usr/bin/env bash
# Bring a GPU node of the platform into service, or have its Auto Scaling group replace it.
#
# The fleet's user data writes /etc/gpu-platform/{node.env,instance-types.json,cloudwatch-agent.json},
# unpacks the node scripts into /opt/gpu-platform/node/ and runs this script as root. The group's
# launch lifecycle hook holds the instance in Pending:Wait meanwhile. Steps, in order:
#
#   config            read node.env (as KEY=value data, never executed); every required key present
#   identity          instance id and type from IMDSv2 (node_facts.py identity)
#   instance-type     GPUs / EFA interfaces / GPUDirect RDMA of this type from instance-types.json
#                     (a type missing there is a failure); EXPECTED_GPUS=<n> and EXPECTED_EFA=<n> (0
#                     unless EFA_ENABLED) written to node.env for gpu-health.service
#   cloudwatch-agent  amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s -c file:<config>; early,
#                     so that the log of a node that fails a later step still reaches CloudWatch
#   units             PYTHON_BIN must import boto3 (one line naming the fix if not); copy systemd/* to
#                     /etc/systemd/system, daemon-reload, enable --now
#                     lifecycle-watcher.service (a node terminated while launching still gets its
#                     termination hook completed), which must stay up (below)
#   scratch           mount-scratch.sh: NVMe instance store (the image's mount of it bound at /scratch
#                     when the image mounted it, once its unit, e.g. the DLAMI's dlami-nvme.service, is
#                     done with the disks; else RAID 0 over several disks) or else the launch
#                     template's scratch EBS volume, formatted only when it holds no file system,
#                     mounted at /scratch (mode 1777, fstab nofail); no such device: skipped
#   efa               EFA_ENABLED=true only: efa-node.env + /etc/profile.d/gpu-platform-nccl.sh
#                     (FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1 on GPUDirect RDMA types,
#                     NCCL_DEBUG=WARN)
#   gpu-health        gpu_health.py --once --expected-gpus N --no-set-health (publishes the metrics) at
#                     the fleet's DCGM level (HEALTH_DCGM_LEVEL, 1), HEALTH_DCGM (auto) and
#                     HEALTH_EXTRA_FATAL_XIDS; on EFA fleets also the EFA devices (as many as the type
#                     has), libfabric's efa provider and NCCL's OFI plugin (--efa-devices N)
#   lustre            systemctl enable + start lustre-mount.service (blocks until mounted or failed); on an
#                     image that is not the golden AMI (no IMAGE_VERSIONS_FILE) with no Lustre client and none
#                     that mount-lustre.sh could install (status 69): a WARNING line, and no file system
#   containers        CONTAINERS_ENABLED=true only: systemctl enable --now docker.service
#   services          systemctl enable --now gpu-health.timer spot-watcher.service; both must stay up
#   service           only where the user data wrote /etc/gpu-platform/service.json (a served fleet):
#                     check it (serving.settings), write the drop-in of gpu-service.service
#                     (serving.unit), enable --now it, then wait for http://127.0.0.1:<port><path> to
#                     answer 200 within the service's start_timeout_seconds (serving.wait); a timeout
#                     or a failed unit fails the step, with the service log's last lines in this log
#
# Staying up (bootstrap-units.sh): a unit the units or services step started must be active right after its
# start and UNIT_SETTLE_S seconds later, and not restarted by systemd in between; else the step fails with
# the unit's last log lines (its StandardOutput= file and its journal) in this log.
#
# Then the launch hook is completed with CONTINUE. On the first failing step it is completed with
# ABANDON (the group terminates the instance and launches another) and the log names the step.
# Every step is logged to /var/log/gpu-platform/bootstrap.log (0644: the CloudWatch agent reads it
# as cwagent) and to stderr (cloud-init's output log).
#
# Exit status: 0 every step succeeded, launch hook completed with CONTINUE; 1 a step failed,
# completed with ABANDON; 2 a step failed and ABANDON could not be sent (no identity, API error):
# the hook's DefaultResult applies at its heartbeat timeout; 3 every step succeeded but CONTINUE
# could not be sent.
#
# Overridable for tests and triage (defaults in brackets): NODE_ENV_FILE, INSTANCE_TYPES_FILE,
# CLOUDWATCH_AGENT_CONFIG, EFA_NODE_ENV_FILE [/etc/gpu-platform/...], PROFILE_SCRIPT
# [/etc/profile.d/gpu-platform-nccl.sh], BOOTSTRAP_LOG, SYSTEMD_UNIT_DIR [/etc/systemd/system],
# IMDS_URL [http://169.254.169.254], PYTHON_BIN [/usr/bin/python3], SYSTEMCTL_BIN [systemctl],
# SERVICE_FILE [/etc/gpu-platform/service.json], SERVICE_WAIT_INTERVAL_S [2], UNIT_SETTLE_S [5],
# JOURNALCTL_BIN [journalctl], UNIT_LOG_ROOT [empty: a folder the units' log files are read under],
# IMAGE_VERSIONS_FILE [/opt/gpu-platform/image-versions.json: present on the golden AMI only],
# FI_INFO_BIN [/opt/amazon/efa/bin/fi_info], CLOUDWATCH_AGENT_CTL [the agent's ctl under
# /opt/aws/amazon-cloudwatch-agent/bin], GPU_HEALTH_ARGS (extra gpu_health.py flags, split on
# spaces), LOG_FLUSH_WAIT_S [10: seconds given to the agent to ship the log before ABANDON]; the
# scratch step's own (SCRATCH_MOUNT_POINT, FSTAB, LSBLK_BIN, BLKID_BIN, MKFS_BIN, MOUNT_BIN, ...)
# reach mount-scratch.sh through the environment.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail
umask 022

# The folder of the script itself, also when cloud-init runs it through its per-boot link.
NODE_DIR="$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")" && pwd)"
readonly NODE_DIR
readonly NODE_ENV_FILE="${NODE_ENV_FILE:-/etc/gpu-platform/node.env}"
readonly INSTANCE_TYPES_FILE="${INSTANCE_TYPES_FILE:-/etc/gpu-platform/instance-types.json}"
readonly CLOUDWATCH_AGENT_CONFIG="${CLOUDWATCH_AGENT_CONFIG:-/etc/gpu-platform/cloudwatch-agent.json}"
readonly EFA_NODE_ENV_FILE="${EFA_NODE_ENV_FILE:-/etc/gpu-platform/efa-node.env}"
readonly PROFILE_SCRIPT="${PROFILE_SCRIPT:-/etc/profile.d/gpu-platform-nccl.sh}"
readonly BOOTSTRAP_LOG="${BOOTSTRAP_LOG:-/var/log/gpu-platform/bootstrap.log}"
readonly SYSTEMD_UNIT_DIR="${SYSTEMD_UNIT_DIR:-/etc/systemd/system}"
readonly IMDS_URL="${IMDS_URL:-http://169.254.169.254}"
readonly PYTHON_BIN="${PYTHON_BIN:-/usr/bin/python3}"
readonly SYSTEMCTL_BIN="${SYSTEMCTL_BIN:-systemctl}"
readonly FI_INFO_BIN="${FI_INFO_BIN:-/opt/amazon/efa/bin/fi_info}"
readonly CLOUDWATCH_AGENT_CTL="${CLOUDWATCH_AGENT_CTL:-/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl}"
readonly GPU_HEALTH_ARGS="${GPU_HEALTH_ARGS:-}"
readonly LOG_FLUSH_WAIT_S="${LOG_FLUSH_WAIT_S:-10}"
readonly SERVICE_FILE="${SERVICE_FILE:-/etc/gpu-platform/service.json}"
readonly SERVICE_WAIT_INTERVAL_S="${SERVICE_WAIT_INTERVAL_S:-2}"
readonly UNIT_SETTLE_S="${UNIT_SETTLE_S:-5}"
readonly JOURNALCTL_BIN="${JOURNALCTL_BIN:-journalctl}"
readonly UNIT_LOG_ROOT="${UNIT_LOG_ROOT:-}"
readonly IMAGE_VERSIONS_FILE="${IMAGE_VERSIONS_FILE:-/opt/gpu-platform/image-versions.json}"

readonly STEPS=(config identity instance-type cloudwatch-agent units scratch efa gpu-health lustre containers services
  service)
readonly REQUIRED_KEYS=(GPU_PLATFORM_ENV AWS_REGION FLEET_NAME ASG_NAME LAUNCH_HOOK_NAME TERMINATE_HOOK_NAME
  METRIC_NAMESPACE FSX_DNS_NAME FSX_MOUNT_NAME EFA_ENABLED CONTAINERS_ENABLED)
readonly BOOLEAN_KEYS=(EFA_ENABLED CONTAINERS_ENABLED)
# Optional health keys (the fleet's health: settings) and the pattern each value must match.
declare -rA HEALTH_KEYS=([HEALTH_DCGM_LEVEL]='^[1-4]$' [HEALTH_DCGM]='^(auto|required|off)$'
  [HEALTH_EXTRA_FATAL_XIDS]='^[0-9]+(,[0-9]+)*$')
readonly LIFECYCLE_WATCHER_UNIT=lifecycle-watcher.service
readonly LUSTRE_UNIT=lustre-mount.service
readonly CONTAINER_RUNTIME_UNIT=docker.service
readonly SERVICE_UNITS=(gpu-health.timer spot-watcher.service)
readonly GPU_SERVICE_UNIT=gpu-service.service

declare -A CONF=()
INSTANCE_ID=""
INSTANCE_TYPE=""
EXPECTED_GPUS=""
EXPECTED_EFA=""
GPUDIRECT_RDMA=""
LOG_READY=false
AGENT_STARTED=false
CURRENT_STEP="start"
FINISHED=false
STDERR_FILE=""
CAPTURED=""

# ---------------------------------------------------------------------------------------------
# logging
# ---------------------------------------------------------------------------------------------

log() {
  local now line
  TZ=UTC0 printf -v now '%(%Y-%m-%dT%H:%M:%SZ)T' -1
  line="${now} bootstrap: $*"
  printf '%s\n' "$line" >&2
  if [[ "$LOG_READY" == true ]]; then
    { printf '%s\n' "$line" >>"$BOOTSTRAP_LOG"; } 2>/dev/null || true
  fi
}

# Log each line of stdin, indented under the command that printed it.
relay() {
  local line
  while IFS= read -r line || [[ -n "$line" ]]; do
    log "  ${line}"
  done
}

# run_logged CMD...: run a command with its output in the log; its exit status is returned.
run_logged() {
  log "\$ $*"
  local rc=0
  "$@" 2>&1 | relay || rc=$?
  return "$rc"
}

# capture CMD...: the command's stdout into CAPTURED, its stderr into the log.
capture() {
  local rc=0
  CAPTURED="$("$@" 2>"$STDERR_FILE")" || rc=$?
  relay <"$STDERR_FILE"
  return "$rc"
}

open_log() {
  local dir
  dir="$(dirname -- "$BOOTSTRAP_LOG")"
  if { [[ -d "$dir" ]] || install -d -m 0755 -- "$dir"; } && touch -- "$BOOTSTRAP_LOG" && chmod 0644 -- "$BOOTSTRAP_LOG"; then
    LOG_READY=true
  else
    log "cannot write ${BOOTSTRAP_LOG}; logging to stderr only"
  fi
}

# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------

# write_file PATH CONTENT: written whole (temporary file + rename), mode 0644, parent created.
write_file() {
  local path="$1" content="$2" tmp
  mkdir -p -- "$(dirname -- "$path")" || return 1
  tmp="$(mktemp "${path}.XXXXXX")" || return 1
  if printf '%s' "$content" >"$tmp" && chmod 0644 -- "$tmp" && mv -f -- "$tmp" "$path"; then
    return 0
  fi
  rm -f -- "$tmp"
  return 1
}

# set_env_value KEY VALUE: KEY=VALUE in node.env, replacing an earlier KEY line (a re-run adds none).
set_env_value() {
  local key="$1" value="$2" kept nl=$'\n'
  kept="$(awk -v prefix="${key}=" 'index($0, prefix) != 1' "$NODE_ENV_FILE")" || return 1
  write_file "$NODE_ENV_FILE" "${kept:+${kept}${nl}}${key}=${value}${nl}"
}

# The steps (step_* and run_step, which runs one by name) are in bootstrap-steps.sh beside this file, those
# that start systemd units in bootstrap-units.sh.
# shellcheck source=bootstrap-steps.sh source-path=SCRIPTDIR  # shellcheck -x checks the files together
source "${NODE_DIR}/bootstrap-steps.sh"
# shellcheck source=bootstrap-units.sh source-path=SCRIPTDIR
source "${NODE_DIR}/bootstrap-units.sh"

# ---------------------------------------------------------------------------------------------
# the launch lifecycle hook
# ---------------------------------------------------------------------------------------------

complete_launch_hook() {
  local result="$1" key missing=()
  if [[ -z "$INSTANCE_ID" ]]; then
    read_identity || true
  fi
  for key in LAUNCH_HOOK_NAME ASG_NAME AWS_REGION; do
    [[ -n "${CONF[$key]:-}" ]] || missing+=("$key")
  done
  [[ -n "$INSTANCE_ID" ]] || missing+=(instance-id)
  if ((${#missing[@]} > 0)); then
    log "cannot complete the launch lifecycle hook with ${result}: unknown ${missing[*]}"
    return 1
  fi
  run_logged "$PYTHON_BIN" "$NODE_DIR/lifecycle.py" complete --result "$result" \
    --hook-name "${CONF[LAUNCH_HOOK_NAME]}" --asg-name "${CONF[ASG_NAME]}" \
    --instance-id "$INSTANCE_ID" --region "${CONF[AWS_REGION]}"
}

abandon() {
  local reason="$1"
  log "bootstrap FAILED at step ${CURRENT_STEP} (${reason}); completing the launch lifecycle hook with ABANDON (the group replaces this node)"
  if [[ "$AGENT_STARTED" == true && "$LOG_FLUSH_WAIT_S" != 0 ]]; then
    log "waiting ${LOG_FLUSH_WAIT_S} s for the CloudWatch agent to ship this log"
    sleep "$LOG_FLUSH_WAIT_S" || true
  fi
  if complete_launch_hook ABANDON; then
    log "launch lifecycle hook completed with ABANDON"
    return 1
  fi
  log "ABANDON could not be sent: the hook's DefaultResult applies when its heartbeat timeout ends"
  return 2
}

# The EXIT trap: a bug or a signal outside the steps still abandons the launch.
# shellcheck disable=SC2329  # invoked by the trap
on_exit() {
  local rc=$?
  if [[ "$FINISHED" != true ]]; then
    FINISHED=true
    trap - EXIT
    local status="$rc"
    rc=0
    abandon "stopped unexpectedly, status ${status}" || rc=$?
  fi
  [[ -z "$STDERR_FILE" ]] || rm -f -- "$STDERR_FILE"
  exit "$rc"
}

main() {
  trap on_exit EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  STDERR_FILE="$(mktemp)"
  open_log
  log "bootstrap of the GPU node starting (scripts in ${NODE_DIR})"

  local step rc failed
  for step in "${STEPS[@]}"; do
    CURRENT_STEP="$step"
    log "step ${step}: start"
    rc=0
    run_step "$step" || rc=$?
    if ((rc != 0)); then
      log "step ${step}: FAILED (status ${rc})"
      FINISHED=true
      failed="$rc"
      rc=0
      abandon "status ${failed}" || rc=$?
      exit "$rc"
    fi
    log "step ${step}: ok"
  done

  CURRENT_STEP="complete"
  FINISHED=true
  if complete_launch_hook CONTINUE; then
    log "bootstrap complete: launch lifecycle hook completed with CONTINUE; ${INSTANCE_ID} goes in service"
    exit 0
  fi
  log "every step succeeded but CONTINUE could not be sent: the hook's DefaultResult applies when its heartbeat timeout ends"
  exit 3
}

main "$@"
