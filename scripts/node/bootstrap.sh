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
#   units             copy systemd/* to /etc/systemd/system, daemon-reload, enable --now
#                     lifecycle-watcher.service (a node terminated while launching still gets its
#                     termination hook completed)
#   scratch           mount-scratch.sh: NVMe instance store (RAID 0 over several disks) or else the
#                     launch template's scratch EBS volume, formatted only when it holds no file
#                     system, mounted at /scratch (mode 1777, fstab nofail); no such device: skipped
#   efa               EFA_ENABLED=true only: efa-node.env + /etc/profile.d/gpu-platform-nccl.sh
#                     (FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1 on GPUDirect RDMA types,
#                     NCCL_DEBUG=WARN)
#   gpu-health        gpu_health.py --once --expected-gpus N --no-set-health (publishes the metrics) at
#                     the fleet's DCGM level (HEALTH_DCGM_LEVEL, 1), HEALTH_DCGM (auto) and
#                     HEALTH_EXTRA_FATAL_XIDS; on EFA fleets also the EFA devices (as many as the type
#                     has), libfabric's efa provider and NCCL's OFI plugin (--efa-devices N)
#   lustre            systemctl enable + start lustre-mount.service (blocks until mounted or failed)
#   containers        CONTAINERS_ENABLED=true only: systemctl enable --now docker.service
#   services          systemctl enable --now gpu-health.timer spot-watcher.service
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

NODE_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
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

readonly STEPS=(config identity instance-type cloudwatch-agent units scratch efa gpu-health lustre containers services)
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

# ---------------------------------------------------------------------------------------------
# steps: each returns non-zero on failure and logs why (errexit does not apply inside them)
# ---------------------------------------------------------------------------------------------

step_config() {
  if [[ ! -r "$NODE_ENV_FILE" ]]; then
    log "cannot read ${NODE_ENV_FILE}: the user data writes it before running this script"
    return 1
  fi
  local line key value lineno=0 problems=0
  while IFS= read -r line || [[ -n "$line" ]]; do
    lineno=$((lineno + 1))
    line="${line%$'\r'}"
    if [[ -z "${line//[[:space:]]/}" || "$line" =~ ^[[:space:]]*# ]]; then
      continue
    fi
    if [[ ! "$line" =~ ^([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]]; then
      log "${NODE_ENV_FILE}:${lineno}: not a KEY=value line: ${line}"
      problems=$((problems + 1))
      continue
    fi
    key="${BASH_REMATCH[1]}"
    value="${BASH_REMATCH[2]}"
    if [[ "$value" =~ ^\"(.*)\"$ || "$value" =~ ^\'(.*)\'$ ]]; then
      value="${BASH_REMATCH[1]}"
    fi
    CONF["$key"]="$value"
  done <"$NODE_ENV_FILE"

  for key in "${REQUIRED_KEYS[@]}"; do
    if [[ -z "${CONF[$key]:-}" ]]; then
      log "${NODE_ENV_FILE}: ${key} is missing or empty"
      problems=$((problems + 1))
    fi
  done
  for key in "${BOOLEAN_KEYS[@]}"; do
    value="${CONF[$key]:-}"
    if [[ -n "$value" && "$value" != true && "$value" != false ]]; then
      log "${NODE_ENV_FILE}: ${key} must be true or false, got '${value}'"
      problems=$((problems + 1))
    fi
  done
  for key in "${!HEALTH_KEYS[@]}"; do
    value="${CONF[$key]:-}"
    if [[ -n "$value" && ! "$value" =~ ${HEALTH_KEYS[$key]} ]]; then
      log "${NODE_ENV_FILE}: ${key} must match ${HEALTH_KEYS[$key]}, got '${value}'"
      problems=$((problems + 1))
    fi
  done
  CONF[FSX_MOUNT_POINT]="${CONF[FSX_MOUNT_POINT]:-/fsx}"
  CONF[CHECKPOINT_DIR]="${CONF[CHECKPOINT_DIR]:-${CONF[FSX_MOUNT_POINT]}/checkpoints}"
  if ((problems > 0)); then
    return 1
  fi
  log "environment ${CONF[GPU_PLATFORM_ENV]}, fleet ${CONF[FLEET_NAME]}, group ${CONF[ASG_NAME]}, region ${CONF[AWS_REGION]}"
  log "EFA ${CONF[EFA_ENABLED]}, containers ${CONF[CONTAINERS_ENABLED]}, Lustre ${CONF[FSX_DNS_NAME]}@tcp:/${CONF[FSX_MOUNT_NAME]} at ${CONF[FSX_MOUNT_POINT]}, checkpoints in ${CONF[CHECKPOINT_DIR]}"
}

read_identity() {
  local key value
  capture "$PYTHON_BIN" "$NODE_DIR/node_facts.py" identity --imds-url "$IMDS_URL" || return 1
  while IFS='=' read -r key value; do
    case "$key" in
      INSTANCE_ID) INSTANCE_ID="$value" ;;
      INSTANCE_TYPE) INSTANCE_TYPE="$value" ;;
      *) ;;
    esac
  done <<<"$CAPTURED"
  if [[ -z "$INSTANCE_ID" || -z "$INSTANCE_TYPE" ]]; then
    log "IMDS gave no instance id or instance type"
    return 1
  fi
}

step_identity() {
  read_identity || return 1
  log "instance ${INSTANCE_ID}, type ${INSTANCE_TYPE}"
}

step_instance_type() {
  local key value
  capture "$PYTHON_BIN" "$NODE_DIR/node_facts.py" instance-type \
    --file "$INSTANCE_TYPES_FILE" --type "$INSTANCE_TYPE" || return 1
  while IFS='=' read -r key value; do
    case "$key" in
      GPUS) EXPECTED_GPUS="$value" ;;
      EFA_INTERFACES) EXPECTED_EFA="$value" ;;
      GPUDIRECT_RDMA) GPUDIRECT_RDMA="$value" ;;
      *) ;;
    esac
  done <<<"$CAPTURED"
  if [[ ! "$EXPECTED_GPUS" =~ ^[1-9][0-9]*$ || ! "$EXPECTED_EFA" =~ ^[0-9]+$ || ! "$GPUDIRECT_RDMA" =~ ^(true|false)$ ]]; then
    log "unexpected facts for ${INSTANCE_TYPE}: ${CAPTURED//$'\n'/ }"
    return 1
  fi
  log "${INSTANCE_TYPE}: ${EXPECTED_GPUS} GPUs, ${EXPECTED_EFA} EFA interfaces, GPUDirect RDMA ${GPUDIRECT_RDMA}"
  set_env_value EXPECTED_GPUS "$EXPECTED_GPUS" || {
    log "cannot write EXPECTED_GPUS to ${NODE_ENV_FILE}"
    return 1
  }
  local efa_devices=0
  [[ "${CONF[EFA_ENABLED]}" != true ]] || efa_devices="$EXPECTED_EFA"
  set_env_value EXPECTED_EFA "$efa_devices" || {
    log "cannot write EXPECTED_EFA to ${NODE_ENV_FILE}"
    return 1
  }
  log "EXPECTED_GPUS=${EXPECTED_GPUS}, EXPECTED_EFA=${efa_devices} written to ${NODE_ENV_FILE}"
}

step_cloudwatch_agent() {
  if [[ ! -r "$CLOUDWATCH_AGENT_CONFIG" ]]; then
    log "cannot read ${CLOUDWATCH_AGENT_CONFIG}: the user data writes it before running this script"
    return 1
  fi
  run_logged "$CLOUDWATCH_AGENT_CTL" -a fetch-config -m ec2 -s -c "file:${CLOUDWATCH_AGENT_CONFIG}" || return 1
  AGENT_STARTED=true
}

step_units() {
  local unit target copied=0
  mkdir -p -- "$SYSTEMD_UNIT_DIR" || return 1
  for unit in "$NODE_DIR"/systemd/*.service "$NODE_DIR"/systemd/*.timer; do
    [[ -f "$unit" ]] || continue
    target="${SYSTEMD_UNIT_DIR}/$(basename -- "$unit")"
    # rm first: a unit linked there earlier (systemctl link) would make install copy onto itself.
    if ! { rm -f -- "$target" && install -m 0644 -- "$unit" "$target"; }; then
      log "cannot install ${unit} as ${target}"
      return 1
    fi
    copied=$((copied + 1))
  done
  if ((copied == 0)); then
    log "no unit files under ${NODE_DIR}/systemd"
    return 1
  fi
  log "installed ${copied} unit files in ${SYSTEMD_UNIT_DIR}"
  run_logged "$SYSTEMCTL_BIN" daemon-reload || return 1
  run_logged "$SYSTEMCTL_BIN" enable --now "$LIFECYCLE_WATCHER_UNIT" || return 1
}

step_scratch() {
  run_logged bash "$NODE_DIR/mount-scratch.sh"
}

step_efa() {
  if [[ "${CONF[EFA_ENABLED]}" != true ]]; then
    log "EFA_ENABLED=false: nothing to do"
    return 0
  fi
  if ((EXPECTED_EFA < 1)); then
    log "EFA_ENABLED=true but ${INSTANCE_TYPE} has no EFA interface in ${INSTANCE_TYPES_FILE}"
    return 1
  fi
  local settings=(FI_PROVIDER=efa) setting header env_text profile_text
  if [[ "$GPUDIRECT_RDMA" == true ]]; then
    settings+=(FI_EFA_USE_DEVICE_RDMA=1)
  fi
  settings+=(NCCL_DEBUG=WARN)
  header="# Written by ${NODE_DIR}/bootstrap.sh for ${INSTANCE_TYPE} (${EXPECTED_EFA} EFA interfaces, GPUDirect RDMA ${GPUDIRECT_RDMA})."
  env_text="${header}"$'\n'
  profile_text="${header}"$'\n'
  for setting in "${settings[@]}"; do
    env_text+="${setting}"$'\n'
    profile_text+="export ${setting}"$'\n'
  done
  write_file "$EFA_NODE_ENV_FILE" "$env_text" || {
    log "cannot write ${EFA_NODE_ENV_FILE}"
    return 1
  }
  write_file "$PROFILE_SCRIPT" "$profile_text" || {
    log "cannot write ${PROFILE_SCRIPT}"
    return 1
  }
  log "wrote ${EFA_NODE_ENV_FILE} and ${PROFILE_SCRIPT}: ${settings[*]} (the gpu-health step checks the devices)"
}

step_gpu_health() {
  local -a extra=()
  if [[ -n "$GPU_HEALTH_ARGS" ]]; then
    read -r -a extra <<<"$GPU_HEALTH_ARGS"
  fi
  local -a health=(--dcgm-level "${CONF[HEALTH_DCGM_LEVEL]:-1}" --dcgm "${CONF[HEALTH_DCGM]:-auto}")
  if [[ -n "${CONF[HEALTH_EXTRA_FATAL_XIDS]:-}" ]]; then
    health+=(--extra-fatal-xids "${CONF[HEALTH_EXTRA_FATAL_XIDS]}")
  fi
  if [[ "${CONF[EFA_ENABLED]}" == true ]]; then
    health+=(--efa-devices "$EXPECTED_EFA" --fi-info "$FI_INFO_BIN")
  else
    health+=(--efa-devices 0)
  fi
  # Unhealthy here abandons the launch (below); the reasons are in this log and, per reason class, in
  # the GpuNodeUnhealthy metric (CompleteLifecycleAction carries no reason).
  run_logged "$PYTHON_BIN" "$NODE_DIR/gpu_health.py" --once --expected-gpus "$EXPECTED_GPUS" --no-set-health \
    --namespace "${CONF[METRIC_NAMESPACE]}" --asg-name "${CONF[ASG_NAME]}" --instance-id "$INSTANCE_ID" \
    --region "${CONF[AWS_REGION]}" --imds-url "$IMDS_URL" "${health[@]}" "${extra[@]}"
}

step_lustre() {
  run_logged "$SYSTEMCTL_BIN" enable "$LUSTRE_UNIT" || return 1
  if ! run_logged "$SYSTEMCTL_BIN" start "$LUSTRE_UNIT"; then
    log "${LUSTRE_UNIT} failed to mount ${CONF[FSX_DNS_NAME]}@tcp:/${CONF[FSX_MOUNT_NAME]} at ${CONF[FSX_MOUNT_POINT]}"
    run_logged "$SYSTEMCTL_BIN" status --no-pager --lines=20 "$LUSTRE_UNIT" || true
    return 1
  fi
}

step_containers() {
  if [[ "${CONF[CONTAINERS_ENABLED]}" != true ]]; then
    log "CONTAINERS_ENABLED=false: nothing to do"
    return 0
  fi
  run_logged "$SYSTEMCTL_BIN" enable --now "$CONTAINER_RUNTIME_UNIT"
}

step_services() {
  local unit
  for unit in "${SERVICE_UNITS[@]}"; do
    run_logged "$SYSTEMCTL_BIN" enable --now "$unit" || return 1
  done
}

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

run_step() {
  case "$1" in
    config) step_config ;;
    identity) step_identity ;;
    instance-type) step_instance_type ;;
    cloudwatch-agent) step_cloudwatch_agent ;;
    units) step_units ;;
    scratch) step_scratch ;;
    efa) step_efa ;;
    gpu-health) step_gpu_health ;;
    lustre) step_lustre ;;
    containers) step_containers ;;
    services) step_services ;;
    *)
      log "unknown step $1"
      return 1
      ;;
  esac
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
