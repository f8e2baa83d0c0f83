#!/usr/bin/env bash
# Ask the training process to checkpoint now, then wait for a new file under the checkpoint
# directory on Lustre. spot_watcher.py runs this on a Spot interruption or rebalance notice.
#
# Environment (the spot-watcher unit reads /etc/gpu-platform/node.env):
#   TRAINING_PID_FILE       pid file of the training process; tried first
#   TRAINING_PGREP_PATTERN  `pgrep -f` pattern used when the pid file names no live process;
#                           every matching process is signalled
#   CHECKPOINT_DIR          where checkpoints appear (default /fsx/checkpoints)
#   CHECKPOINT_TIMEOUT      whole seconds to wait for a new file (default 90)
#   CHECKPOINT_SIGNAL       signal to send (default USR1)
#   CHECKPOINT_POLL         seconds between looks at CHECKPOINT_DIR (default 2; fractions allowed)
#   NOTICE_KIND, NOTICE_ACTION, NOTICE_TIME   set by spot_watcher.py, only logged here
#
# Exit status: 0 a new checkpoint file appeared; 1 bad configuration; 2 no training process
# found or it could not be signalled; 3 no new file before the timeout.
set -euo pipefail

readonly CHECKPOINT_DIR="${CHECKPOINT_DIR:-/fsx/checkpoints}"
readonly CHECKPOINT_TIMEOUT="${CHECKPOINT_TIMEOUT:-90}"
readonly CHECKPOINT_SIGNAL="${CHECKPOINT_SIGNAL:-USR1}"
readonly CHECKPOINT_POLL="${CHECKPOINT_POLL:-2}"

log() {
  printf 'checkpoint-hook: %s\n' "$*" >&2
}

now_ms() {
  # EPOCHREALTIME (bash 5) is seconds.microseconds; drop the separator, whatever the locale.
  local micros="${EPOCHREALTIME//[!0-9]/}"
  printf '%s\n' "$((10#$micros / 1000))"
}

# Pids to signal, one per line: the pid file's process if alive, else every pgrep -f match.
training_pids() {
  local pid=""
  if [[ -n "${TRAINING_PID_FILE:-}" && -r "${TRAINING_PID_FILE}" ]]; then
    pid="$(tr -dc '0-9' <"${TRAINING_PID_FILE}")"
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      printf '%s\n' "$pid"
      return 0
    fi
    log "pid file ${TRAINING_PID_FILE} names no live process"
  fi
  if [[ -n "${TRAINING_PGREP_PATTERN:-}" ]]; then
    pgrep -f -- "${TRAINING_PGREP_PATTERN}" || true
  fi
}

list_files() {
  { find "$CHECKPOINT_DIR" -type f -print 2>/dev/null || true; } | LC_ALL=C sort
}

main() {
  if [[ ! "$CHECKPOINT_TIMEOUT" =~ ^[0-9]+$ ]]; then
    log "CHECKPOINT_TIMEOUT must be whole seconds, got '${CHECKPOINT_TIMEOUT}'"
    return 1
  fi
  if [[ ! -d "$CHECKPOINT_DIR" ]]; then
    log "checkpoint directory ${CHECKPOINT_DIR} does not exist (is Lustre mounted?)"
    return 1
  fi
  log "notice: kind=${NOTICE_KIND:-manual} action=${NOTICE_ACTION:-} time=${NOTICE_TIME:-}"

  local pids
  pids="$(training_pids)"
  if [[ -z "$pids" ]]; then
    log "no training process found (TRAINING_PID_FILE='${TRAINING_PID_FILE:-}', TRAINING_PGREP_PATTERN='${TRAINING_PGREP_PATTERN:-}')"
    return 2
  fi

  local before
  before="$(mktemp)"
  # shellcheck disable=SC2064  # expand now: the path is fixed
  trap "rm -f -- '${before}'" EXIT
  list_files >"$before"

  local pid signalled=0
  while IFS= read -r pid; do
    if kill -s "$CHECKPOINT_SIGNAL" "$pid" 2>/dev/null; then
      log "sent SIG${CHECKPOINT_SIGNAL} to pid ${pid}"
      signalled=$((signalled + 1))
    else
      log "could not signal pid ${pid}"
    fi
  done <<<"$pids"
  if ((signalled == 0)); then
    return 2
  fi

  local deadline new_file
  deadline=$(($(now_ms) + CHECKPOINT_TIMEOUT * 1000))
  while :; do
    new_file="$(list_files | LC_ALL=C comm -13 "$before" - | sed -n '1p')"
    if [[ -n "$new_file" ]]; then
      log "new checkpoint file: ${new_file}"
      return 0
    fi
    if (($(now_ms) >= deadline)); then
      break
    fi
    sleep "$CHECKPOINT_POLL"
  done
  log "no new file under ${CHECKPOINT_DIR} within ${CHECKPOINT_TIMEOUT} s"
  return 3
}

main "$@"
