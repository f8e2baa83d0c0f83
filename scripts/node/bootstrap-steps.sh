#!/usr/bin/env bash
# The steps of bootstrap.sh, which sources this file: each step_* function returns non-zero on failure
# and logs why (errexit does not apply inside them); run_step runs one by its name in STEPS. The steps,
# in order, what each does, and the settings they read are described at the top of bootstrap.sh. The
# steps that start systemd units (units, lustre, containers, services, service) are in bootstrap-units.sh.
#
# The settings (NODE_ENV_FILE, PYTHON_BIN, ...), the node's state (INSTANCE_ID, EXPECTED_GPUS, ...) and
# the helpers (log, run_logged, capture, write_file, set_env_value) are bootstrap.sh's.
# shellcheck disable=SC2154  # they are assigned in bootstrap.sh (set -u there stops on any that is not)

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
  fi
  echo "bootstrap-steps.sh is sourced by bootstrap.sh; run bootstrap.sh" >&2
  exit 2
fi

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
  # shellcheck disable=SC2034  # read by bootstrap.sh's abandon (gives the agent time to ship the log)
  AGENT_STARTED=true
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
  # the GpuNodeUnhealthy metric (CompleteLifecycleAction carries no reason). The platform's units are not
  # counted here: the units and services steps check those they start.
  run_logged "$PYTHON_BIN" "$NODE_DIR/gpu_health.py" --once --expected-gpus "$EXPECTED_GPUS" --no-set-health --no-unit-check \
    --namespace "${CONF[METRIC_NAMESPACE]}" --asg-name "${CONF[ASG_NAME]}" --instance-id "$INSTANCE_ID" \
    --region "${CONF[AWS_REGION]}" --imds-url "$IMDS_URL" "${health[@]}" "${extra[@]}"
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
    service) step_service ;;
    *)
      log "unknown step $1"
      return 1
      ;;
  esac
}
