#!/usr/bin/env bash
# The steps of bootstrap.sh that start systemd units (units, lustre, containers, services, service), sourced
# by it like bootstrap-steps.sh, and the check that a unit it started stays up.
#
# confirm_units: `systemctl enable --now` of a Type=simple unit succeeds as soon as systemd has forked its
# process, even when the program dies a moment later (and Restart= then hides it in a loop). So each unit the
# units and services steps start is looked at (systemctl show: ActiveState, SubState, Result, NRestarts) right
# after its start and again UNIT_SETTLE_S seconds later: not active then, or restarted by systemd in between,
# fails the step. The log then holds the unit's last lines: the file its installed unit file names in
# StandardOutput=append: (read under UNIT_LOG_ROOT) and `journalctl --unit` (JOURNALCTL_BIN). The service
# step shows the same lines when the fleet's service does not come up.
#
# The settings (SYSTEMCTL_BIN, UNIT_SETTLE_S, ...), the node's state (CONF) and the helpers (log, relay,
# run_logged, capture, write_file) are bootstrap.sh's.
# shellcheck disable=SC2154  # they are assigned in bootstrap.sh (set -u there stops on any that is not)

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
  fi
  echo "bootstrap-units.sh is sourced by bootstrap.sh; run bootstrap.sh" >&2
  exit 2
fi

readonly UNIT_LOG_LINES=20
declare -A UNIT_STATE=()

# unit_state UNIT: the unit's ActiveState, SubState, Result and NRestarts (systemctl show) into UNIT_STATE.
unit_state() {
  local key value
  UNIT_STATE=([ActiveState]=unknown [SubState]=unknown [Result]=unknown [NRestarts]=0)
  if ! capture "$SYSTEMCTL_BIN" show --property=ActiveState,SubState,Result,NRestarts "$1"; then
    log "cannot read the state of $1 (systemctl show failed)"
    return 1
  fi
  while IFS='=' read -r key value; do
    [[ -n "${UNIT_STATE[$key]+set}" && -n "$value" ]] || continue
    [[ "$key" != NRestarts || "$value" =~ ^[0-9]+$ ]] || continue
    UNIT_STATE["$key"]="$value"
  done <<<"$CAPTURED"
}

# The file a unit appends its output to: StandardOutput=append: (or file:) of its installed unit file.
unit_log_file() {
  sed -n -E 's/^[[:space:]]*StandardOutput=(append|file|truncate):(.+)$/\2/p' "${SYSTEMD_UNIT_DIR}/$1" 2>/dev/null |
    tail -n 1
}

# show_unit_logs UNIT: the last lines of the unit's own log file and of its journal, into this log.
show_unit_logs() {
  local unit="$1" file
  file="$(unit_log_file "$unit")"
  if [[ -n "$file" && -r "${UNIT_LOG_ROOT}${file}" ]]; then
    log "the last lines of ${file}:"
    tail -n "$UNIT_LOG_LINES" -- "${UNIT_LOG_ROOT}${file}" | relay
  elif [[ -n "$file" ]]; then
    log "${unit} wrote nothing to ${file}"
  fi
  run_logged "$JOURNALCTL_BIN" --unit "$unit" --boot --lines="$UNIT_LOG_LINES" --no-pager --output=short-iso || true
}

# unit_died UNIT WHEN: the one line that says so (UNIT_STATE holds what systemd said), then the unit's logs.
unit_died() {
  local state="${UNIT_STATE[ActiveState]}/${UNIT_STATE[SubState]}"
  log "$1 does not stay up: ${state} (result ${UNIT_STATE[Result]}, ${UNIT_STATE[NRestarts]} restarts) $2; fix: the cause in its last lines below"
  show_unit_logs "$1"
}

# confirm_units UNIT...: each unit, just started, is active now and UNIT_SETTLE_S seconds later, not restarted.
confirm_units() {
  local unit i=0
  local -a restarts=()
  for unit in "$@"; do
    unit_state "$unit" || return 1
    if [[ "${UNIT_STATE[ActiveState]}" == failed || "${UNIT_STATE[ActiveState]}" == inactive ]]; then
      unit_died "$unit" "right after its start"
      return 1
    fi
    restarts+=("${UNIT_STATE[NRestarts]}")
  done
  if ! sleep "$UNIT_SETTLE_S"; then
    log "UNIT_SETTLE_S='${UNIT_SETTLE_S}' is not a number of seconds; fix: unset it (default 5)"
    return 1
  fi
  for unit in "$@"; do
    unit_state "$unit" || return 1
    if [[ "${UNIT_STATE[ActiveState]}" != active ]] || ((UNIT_STATE[NRestarts] > restarts[i])); then
      unit_died "$unit" "${UNIT_SETTLE_S} s after its start"
      return 1
    fi
    i=$((i + 1))
  done
  log "$* active, not restarted, ${UNIT_SETTLE_S} s after the start"
}

# The services' Python must import boto3: lifecycle-watcher.service completes the termination hook with it (only
# when the node leaves, so a missing boto3 would show first at a scale-in), gpu-health publishes with it. The golden
# AMI installs it (node-runtime component); the public Deep Learning AMI may not have it for /usr/bin/python3.
check_boto3() {
  local out
  if out="$("$PYTHON_BIN" -c 'import boto3' 2>&1)"; then
    return 0
  fi
  log "${PYTHON_BIN} cannot import boto3 ($(tail -n 1 <<<"$out")): the termination hook and the health metrics need it; fix: launch the golden AMI (its node-runtime component installs python3-boto3) or an image whose ${PYTHON_BIN} has boto3 (apt-get install python3-boto3)"
  return 1
}

step_units() {
  local unit target copied=0
  check_boto3 || return 1
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
  confirm_units "$LIFECYCLE_WATCHER_UNIT"
}

# Exit status of mount-lustre.sh when the image has no Lustre client and none could be installed.
readonly LUSTRE_NO_CLIENT=69

# The file system is mounted (lustre-mount.service), or the launch fails; except on an image that is not the golden
# AMI (no IMAGE_VERSIONS_FILE) and has no Lustre client that mount-lustre.sh could install: abandoning there would
# only launch the same image again, for ever, on the first deploy before the golden AMI exists. Such a node goes in
# service without the file system, and this log says so in one WARNING line.
step_lustre() {
  run_logged "$SYSTEMCTL_BIN" enable "$LUSTRE_UNIT" || return 1
  if run_logged "$SYSTEMCTL_BIN" start "$LUSTRE_UNIT"; then
    return 0
  fi
  local target="${CONF[FSX_DNS_NAME]}@tcp:/${CONF[FSX_MOUNT_NAME]} at ${CONF[FSX_MOUNT_POINT]}" status=""
  log "${LUSTRE_UNIT} failed to mount ${target}"
  run_logged "$SYSTEMCTL_BIN" status --no-pager --lines=20 "$LUSTRE_UNIT" || true
  if capture "$SYSTEMCTL_BIN" show --property=ExecMainStatus "$LUSTRE_UNIT"; then
    status="$(sed -n 's/^ExecMainStatus=//p' <<<"$CAPTURED")"
  fi
  if [[ "$status" == "$LUSTRE_NO_CLIENT" && ! -e "$IMAGE_VERSIONS_FILE" ]]; then
    log "WARNING: no Lustre client on this image (not the golden AMI: no ${IMAGE_VERSIONS_FILE}) and none could be installed: the node goes in service WITHOUT ${CONF[FSX_MOUNT_POINT]} (no shared data, no checkpoints there; jobs that need it fail); fix: launch the golden AMI, which carries the client"
    return 0
  fi
  return 1
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
  confirm_units "${SERVICE_UNITS[@]}"
}

# The fleet's service: started last, once the node is known good; the launch hook's CONTINUE waits for its
# health check. The start timeout counts from the start (an image pull is part of it).
step_service() {
  if [[ ! -e "$SERVICE_FILE" ]]; then
    log "no ${SERVICE_FILE}: this fleet serves nothing"
    return 0
  fi
  local key value mode="" port="" path="" timeout="" started="$SECONDS" left
  capture env PYTHONPATH="$NODE_DIR" "$PYTHON_BIN" -m serving.settings --config "$SERVICE_FILE" || return 1
  while IFS='=' read -r key value; do
    case "$key" in
      MODE) mode="$value" ;;
      PORT) port="$value" ;;
      HEALTH_CHECK_PATH) path="$value" ;;
      START_TIMEOUT) timeout="$value" ;;
      *) ;;
    esac
  done <<<"$CAPTURED"
  log "service (${mode}) on port ${port}, health check ${path}, start timeout ${timeout} s"
  capture env PYTHONPATH="$NODE_DIR" "$PYTHON_BIN" -m serving.unit --config "$SERVICE_FILE" || return 1
  write_file "${SYSTEMD_UNIT_DIR}/${GPU_SERVICE_UNIT}.d/50-service.conf" "$CAPTURED" || {
    log "cannot write the drop-in of ${GPU_SERVICE_UNIT} under ${SYSTEMD_UNIT_DIR}"
    return 1
  }
  run_logged "$SYSTEMCTL_BIN" daemon-reload || return 1
  if run_logged "$SYSTEMCTL_BIN" enable --now "$GPU_SERVICE_UNIT"; then
    left=$((timeout - (SECONDS - started)))
    ((left > 0)) || left=1
    if run_logged env PYTHONPATH="$NODE_DIR" "$PYTHON_BIN" -m serving.wait --port "$port" --path "$path" \
      --timeout "$left" --interval "$SERVICE_WAIT_INTERVAL_S" --unit "$GPU_SERVICE_UNIT" --systemctl "$SYSTEMCTL_BIN"; then
      return 0
    fi
  fi
  log "${GPU_SERVICE_UNIT} is not serving"
  show_unit_logs "$GPU_SERVICE_UNIT"
  run_logged "$SYSTEMCTL_BIN" status --no-pager --lines=0 "$GPU_SERVICE_UNIT" || true
  return 1
}
