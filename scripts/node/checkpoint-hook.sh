#!/usr/bin/env bash
# Ask every training job on this node to checkpoint now, then wait until each one's new checkpoint
# is on Lustre. spot_watcher.py runs this on a Spot interruption or rebalance notice,
# lifecycle_watcher.py when the Auto Scaling group terminates the node (scripts/node/README.md,
# "Checkpoint contract", is what a job does on its side).
#
# One interruption, one request: both watchers may run this within seconds of each other for the
# same departure. An flock on STATE_DIR/checkpoint.lock serialises them; the first records its
# outcome in STATE_DIR/checkpoint.done and the second, once it holds the lock, reuses that outcome
# instead of signalling again. A departure (interruption, termination) reuses any earlier departure's
# outcome; any request reuses an outcome younger than CHECKPOINT_REUSE_S. STATE_DIR is on /run: a
# reboot (Spot stop/hibernate, then start) begins afresh.
#
# Environment (the watcher units read /etc/gpu-platform/node.env):
#   TRAINING_PID_DIR     where jobs put <job>.pid (default /run/gpu-platform/jobs)
#   CHECKPOINT_DIR       checkpoints of job <job> appear under CHECKPOINT_DIR/<job>/ (default /fsx/checkpoints)
#   CHECKPOINT_TIMEOUT   whole seconds to wait for every job's new checkpoint (default 90)
#   CHECKPOINT_STATE_DIR lock and outcome of this node's requests (default /run/gpu-platform)
#   CHECKPOINT_LOCK_WAIT whole seconds to wait for the other watcher's request (default CHECKPOINT_TIMEOUT + 15)
#   CHECKPOINT_REUSE_S   an outcome younger than this is reused by any request (default 120)
#   CHECKPOINT_SIGNAL    signal to send (default USR1)
#   CHECKPOINT_POLL      seconds between looks at the checkpoint directories (default 2; fractions allowed)
#   NOTICE_KIND, NOTICE_ACTION, NOTICE_TIME   set by the watchers: interruption, rebalance, termination
#
# Exit status: 0 every signalled job wrote a new checkpoint; 1 bad configuration or no checkpoint
# directory; 2 no training job to signal; 3 a job wrote nothing before the timeout; 4 the other
# watcher's request did not finish within CHECKPOINT_LOCK_WAIT. A reused outcome exits with its status.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail

readonly TRAINING_PID_DIR="${TRAINING_PID_DIR:-/run/gpu-platform/jobs}"
readonly CHECKPOINT_DIR="${CHECKPOINT_DIR:-/fsx/checkpoints}"
readonly CHECKPOINT_TIMEOUT="${CHECKPOINT_TIMEOUT:-90}"
readonly CHECKPOINT_STATE_DIR="${CHECKPOINT_STATE_DIR:-/run/gpu-platform}"
readonly CHECKPOINT_REUSE_S="${CHECKPOINT_REUSE_S:-120}"
readonly CHECKPOINT_SIGNAL="${CHECKPOINT_SIGNAL:-USR1}"
readonly CHECKPOINT_POLL="${CHECKPOINT_POLL:-2}"
readonly NOTICE_KIND="${NOTICE_KIND:-manual}"
readonly JOB_NAME_RE='^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$'

log() {
  printf 'checkpoint-hook: %s\n' "$*" >&2
}

now_ms() {
  # EPOCHREALTIME (bash 5) is seconds.microseconds; drop the separator, whatever the locale.
  local micros="${EPOCHREALTIME//[!0-9]/}"
  printf '%s\n' "$((10#$micros / 1000))"
}

is_departure() {
  [[ "$1" == interruption || "$1" == termination ]]
}

# "<job> <pid>" per live job: <job>.pid files whose pid is alive and owned by the pid file's owner
# (a user can point the hook only at processes of their own; the hook runs as root with CAP_KILL).
training_jobs() {
  local file job pid
  for file in "$TRAINING_PID_DIR"/*.pid; do
    [[ -e "$file" ]] || continue
    job="$(basename -- "$file" .pid)"
    if [[ -L "$file" || ! -f "$file" || ! "$job" =~ $JOB_NAME_RE ]]; then
      log "ignoring ${file}: not a regular file named <job>.pid"
      continue
    fi
    pid="$(head -c 32 -- "$file" | tr -dc '0-9')"
    if [[ -z "$pid" ]] || ! kill -0 "$pid" 2>/dev/null; then
      log "job ${job}: ${file} names no live process"
      continue
    fi
    if [[ "$(stat -c %u -- "$file")" != "$(stat -c %u "/proc/${pid}")" ]]; then
      log "job ${job}: pid ${pid} is not owned by the owner of ${file}; not signalling it"
      continue
    fi
    printf '%s %s\n' "$job" "$pid"
  done
}

# "inode path" of each finished checkpoint file of a job: names starting with "." are writes in
# progress (the contract: write .<name>, then rename to <name>). A rename over an old name changes
# the inode, so a checkpoint that replaces latest.pt counts as new, whatever the clocks say.
checkpoint_files() {
  { find "${CHECKPOINT_DIR}/$1" -type f ! -name '.*' -printf '%i %p\n' 2>/dev/null || true; } | LC_ALL=C sort
}

# Signal every job and wait for each one's new checkpoint; prints the exit status on stdout.
request_checkpoints() {
  local jobs job pid scratch signalled=()
  jobs="$(training_jobs)"
  if [[ -z "$jobs" ]]; then
    log "no training job found (no <job>.pid naming a live process in ${TRAINING_PID_DIR})"
    echo 2
    return
  fi
  scratch="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: the path is fixed
  trap "rm -rf -- '${scratch}'" EXIT
  while read -r job pid; do
    checkpoint_files "$job" >"${scratch}/${job}"
    if kill -s "$CHECKPOINT_SIGNAL" "$pid" 2>/dev/null; then
      log "job ${job}: sent SIG${CHECKPOINT_SIGNAL} to pid ${pid}"
      signalled+=("$job")
    else
      log "job ${job}: could not signal pid ${pid}"
    fi
  done <<<"$jobs"
  if ((${#signalled[@]} == 0)); then
    echo 2
    return
  fi

  local deadline new_file waiting=("${signalled[@]}") still
  deadline=$(($(now_ms) + CHECKPOINT_TIMEOUT * 1000))
  while ((${#waiting[@]} > 0)); do
    still=()
    for job in "${waiting[@]}"; do
      new_file="$(checkpoint_files "$job" | LC_ALL=C comm -13 "${scratch}/${job}" - | sed -n '1s/^[0-9]* //p')"
      if [[ -n "$new_file" ]]; then
        log "job ${job}: new checkpoint file: ${new_file}"
      else
        still+=("$job")
      fi
    done
    waiting=("${still[@]}")
    ((${#waiting[@]} > 0)) || break
    if (($(now_ms) >= deadline)); then
      log "no new checkpoint under ${CHECKPOINT_DIR}/<job>/ within ${CHECKPOINT_TIMEOUT} s for: ${waiting[*]}"
      echo 3
      return
    fi
    sleep "$CHECKPOINT_POLL"
  done
  echo 0
}

main() {
  local name
  for name in CHECKPOINT_TIMEOUT CHECKPOINT_REUSE_S CHECKPOINT_LOCK_WAIT; do
    if [[ -n "${!name:-}" && ! "${!name}" =~ ^[0-9]+$ ]]; then
      log "${name} must be whole seconds, got '${!name}'"
      return 1
    fi
  done
  local lock_wait="${CHECKPOINT_LOCK_WAIT:-$((CHECKPOINT_TIMEOUT + 15))}"
  if [[ ! -d "$CHECKPOINT_DIR" ]]; then
    log "checkpoint directory ${CHECKPOINT_DIR} does not exist (is Lustre mounted?)"
    return 1
  fi
  if [[ ! -d "$CHECKPOINT_STATE_DIR" || ! -w "$CHECKPOINT_STATE_DIR" ]]; then
    log "state directory ${CHECKPOINT_STATE_DIR} is missing or not writable (RuntimeDirectory= of the watcher unit)"
    return 1
  fi
  log "notice: kind=${NOTICE_KIND} action=${NOTICE_ACTION:-} time=${NOTICE_TIME:-}"

  local done_file="${CHECKPOINT_STATE_DIR}/checkpoint.done"
  exec 9>>"${CHECKPOINT_STATE_DIR}/checkpoint.lock"
  if ! flock -w "$lock_wait" 9; then
    log "another checkpoint request still runs after ${lock_wait} s; not signalling"
    return 4
  fi

  local at kind status age
  if read -r at kind status 2>/dev/null <"$done_file" && [[ "$at" =~ ^[0-9]+$ && "$status" =~ ^[0-9]+$ ]]; then
    age=$(($(now_ms) / 1000 - at))
    if { is_departure "$NOTICE_KIND" && is_departure "$kind"; } || ((age < CHECKPOINT_REUSE_S)); then
      log "reusing the ${kind} request of ${age} s ago (exit ${status}); not signalling again"
      return "$status"
    fi
  fi

  status="$(request_checkpoints)" || true
  [[ "$status" =~ ^[0-9]$ ]] || status=1
  printf '%s %s %s\n' "$(($(now_ms) / 1000))" "$NOTICE_KIND" "$status" >"${done_file}.new"
  mv -f -- "${done_file}.new" "$done_file"
  return "$status"
}

main "$@"
