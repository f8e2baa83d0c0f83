#!/usr/bin/env bash
# The part of mount-scratch.sh that deals with an instance store the image itself sets up, sourced by it from its
# own folder: the wait for the image's unit (IMAGE_STORE_UNIT, the Deep Learning AMI's dlami-nvme.service; up to
# IMAGE_STORE_WAIT_S seconds, polled every IMAGE_STORE_POLL_S) while it is still at work on the instance store
# disks, and the instance store the image mounted (the DLAMI's /opt/dlami/nvme), whose folder `scratch` is bound
# at SCRATCH_MOUNT_POINT. What each does and why is described at the top of mount-scratch.sh (the image's unit,
# and device 0.).
#
# The settings (IMAGE_STORE_UNIT, MOUNT_POINT, MOUNT_BIN, ...), the disks read from lsblk (DISKS, MODEL, MOUNTED,
# MOUNTED_CHILD) and the helpers (log, fail, read_devices, write_fstab) are mount-scratch.sh's.
# shellcheck disable=SC2154  # they are assigned in mount-scratch.sh (set -u there stops on any that is not)

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
  fi
  echo "scratch-image-store.sh is sourced by mount-scratch.sh; run mount-scratch.sh" >&2
  exit 2
fi

has_instance_store() {
  local disk
  for disk in "${DISKS[@]}"; do
    [[ "${MODEL[$disk]}" != "$INSTANCE_STORE_MODEL" ]] || return 0
  done
  return 1
}

# image_unit_state: what systemd says of IMAGE_STORE_UNIT, as "LoadState ActiveState/SubState", and IMAGE_UNIT_BUSY
# true while it is on its way (activating or deactivating, or enabled and not yet started this boot).
image_unit_state() {
  local out key value
  local -A state=()
  IMAGE_UNIT_BUSY=false
  out="$("$SYSTEMCTL_BIN" show \
    --property=LoadState,ActiveState,SubState,UnitFileState,InactiveExitTimestampMonotonic,ConditionTimestampMonotonic \
    "$IMAGE_STORE_UNIT" 2>/dev/null)" || out=""
  while IFS='=' read -r key value; do
    [[ -z "$key" ]] || state["$key"]="$value"
  done <<<"$out"
  IMAGE_UNIT_STATE="${state[LoadState]:-unknown} ${state[ActiveState]:-unknown}/${state[SubState]:-unknown}"
  case "${state[ActiveState]:-}" in
    activating | deactivating) IMAGE_UNIT_BUSY=true ;;
    inactive)  # enabled, never left inactive and its conditions never checked this boot: not started yet
      [[ "${state[UnitFileState]:-}" != enabled || "${state[InactiveExitTimestampMonotonic]:-}" != 0 ||
        "${state[ConditionTimestampMonotonic]:-}" != 0 ]] || IMAGE_UNIT_BUSY=true
      ;;
    *) ;;
  esac
  [[ "${state[LoadState]:-}" == loaded ]]
}

# Wait for the image's instance store unit to be done with the disks (see the header); 1 when it never is.
wait_for_image_store() {
  [[ -n "$IMAGE_STORE_UNIT" ]] && has_instance_store || return 0
  [[ "$IMAGE_STORE_WAIT_S" =~ ^[0-9]+$ ]] || fail "IMAGE_STORE_WAIT_S='${IMAGE_STORE_WAIT_S}' is not whole seconds"
  local deadline=$((SECONDS + IMAGE_STORE_WAIT_S)) waited=false
  while :; do
    if ! image_unit_state; then
      [[ "$waited" == false ]] || log "${IMAGE_STORE_UNIT} is now ${IMAGE_UNIT_STATE}"
      return 0  # the image has no such unit (or no systemd to ask)
    fi
    if [[ "$IMAGE_UNIT_BUSY" == false ]]; then
      log "the image's ${IMAGE_STORE_UNIT} is ${IMAGE_UNIT_STATE#* }: done with the instance store"
      [[ "$waited" == false ]] || read_devices
      return 0
    fi
    if ((SECONDS >= deadline)); then
      fail "the image's ${IMAGE_STORE_UNIT} is still ${IMAGE_UNIT_STATE#* } after ${IMAGE_STORE_WAIT_S} s: the instance store is left to it (no array, no mkfs); fix: its cause in \`journalctl -u ${IMAGE_STORE_UNIT}\`, or a longer IMAGE_STORE_WAIT_S"
    fi
    if [[ "$waited" == false ]]; then
      log "the image's ${IMAGE_STORE_UNIT} is ${IMAGE_UNIT_STATE#* }: waiting up to ${IMAGE_STORE_WAIT_S} s for it to set up the instance store"
      waited=true
    fi
    sleep "$IMAGE_STORE_POLL_S" || fail "IMAGE_STORE_POLL_S='${IMAGE_STORE_POLL_S}' is not a number of seconds"
  done
}

# The instance store the image mounted, if it did: IMAGE_DEVICE (a disk, or an array or partition on one)
# and IMAGE_MOUNT, where it is mounted (not at the mount point: that is a mount of ours, from fstab).
find_image_mount() {
  local disk dev
  for disk in "${DISKS[@]}"; do
    [[ "${MODEL[$disk]}" == "$INSTANCE_STORE_MODEL" ]] || continue
    for dev in "$disk" "${MOUNTED_CHILD[$disk]:-}"; do
      [[ -n "$dev" && -n "${MOUNTED[$dev]:-}" && "${MOUNTED[$dev]}" != "$MOUNT_POINT" ]] || continue
      IMAGE_DEVICE="$dev"
      IMAGE_MOUNT="${MOUNTED[$dev]}"
      return 0
    done
  done
  return 1
}

# MOUNT_POINT on the instance store the image mounted: its folder IMAGE_SCRATCH_DIR bound there, mode 1777.
bind_image_mount() {
  local source="${IMAGE_MOUNT%/}/${IMAGE_SCRATCH_DIR}"
  log "instance store ${IMAGE_DEVICE} is mounted by the image at ${IMAGE_MOUNT}"
  { mkdir -p -- "$source" "$MOUNT_POINT" && chmod 1777 -- "$source"; } ||
    fail "cannot create ${source} (mode 1777) and ${MOUNT_POINT}"
  log "\$ ${MOUNT_BIN} --bind ${source} ${MOUNT_POINT}"
  "$MOUNT_BIN" --bind "$source" "$MOUNT_POINT" 2>&1 || fail "cannot bind ${source} at ${MOUNT_POINT}"
  chmod 1777 -- "$MOUNT_POINT" || fail "cannot set mode 1777 on ${MOUNT_POINT}"
  write_fstab ""
  log "${MOUNT_POINT} is ${source} (instance store ${IMAGE_DEVICE}, mounted by the image), mode 1777"
}
