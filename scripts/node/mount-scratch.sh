#!/usr/bin/env bash
# Give a GPU node its local scratch file system at /scratch; the bootstrap's `scratch` step runs this.
#
# The image's own instance store unit first: the Deep Learning AMI's dlami-nvme.service (Type=oneshot, started
# at boot beside cloud-init, not ordered before it) stripes the instance store disks into one LVM volume and
# mounts it at /opt/dlami/nvme. While it runs, the disks may still look blank, and building an array of ours over
# them would race it. So where the node has instance store disks and the image has that unit (IMAGE_STORE_UNIT),
# this waits, up to IMAGE_STORE_WAIT_S seconds, while the unit is activating (or enabled and not started yet
# this boot), then looks at the disks again. Still activating then: exit 1 without touching the disks (the
# bootstrap abandons; the log names the unit). A unit that ended without mounting leaves the disks to 1. below.
#
# Which device:
#   0. NVMe instance store that the image mounted before the bootstrap ran (the Deep Learning AMI mounts
#      it at /opt/dlami/nvme): an instance store disk, or an array or partition on one, mounted anywhere
#      but at SCRATCH_MOUNT_POINT. Its folder `scratch` (created, mode 1777) is bind-mounted at
#      SCRATCH_MOUNT_POINT, so that /scratch is that store and the image's own files stay out of sight.
#      The log names the device and the image's mount point (as does findmnt /scratch). No fstab line (a
#      stale one for the mount point is removed): the image mounts the store at each boot and the
#      bootstrap, which runs at each boot, binds it again.
#   1. NVMe instance store, where the instance type has it (p4d, p4de, p5...): disks whose NVMe model
#      is "Amazon EC2 NVMe Instance Storage". One disk is used as is; several are striped into one
#      RAID 0 array (mdadm) so that a job sees all of them at one path; without mdadm the first disk
#      is used and the log names the others. An array assembled earlier (a reboot) is used again.
#   2. Otherwise the scratch EBS volume of the launch template: on Nitro instances EBS volumes are
#      NVMe disks (model "Amazon Elastic Block Store", serial = volume id) whose kernel names do not
#      follow the launch template's DeviceName; the name EC2 was given (SCRATCH_EBS_DEVICE, /dev/sdb)
#      is read from the NVMe controller's vendor-specific data (`nvme id-ctrl -v`). Without nvme-cli,
#      the only EBS disk with no partitions and no mount. The root disk (partitioned, mounted) never
#      qualifies.
#   3. Neither: nothing to do (the fleet configures no scratch volume), exit 0.
# The device is formatted (xfs, label gpu-scratch) only when blkid finds no file system on it: a
# reboot or a warm-pool restart keeps its data. Instance store comes back blank after a stop, and is
# formatted again then. Mounted at SCRATCH_MOUNT_POINT (mode 1777), with one /etc/fstab line for that
# mount point (by UUID; nofail and x-systemd.device-timeout, so that a missing device never blocks a
# boot), replacing any earlier line for it. Already mounted there: only the mode is set.
#
# Overridable (defaults in brackets): SCRATCH_MOUNT_POINT [/scratch], SCRATCH_EBS_DEVICE [/dev/sdb],
# SCRATCH_RAID_DEVICE [/dev/md/gpu-scratch], FSTAB [/etc/fstab], PROC_MOUNTS [/proc/mounts],
# LSBLK_BIN [lsblk], BLKID_BIN [blkid], MKFS_BIN [mkfs.xfs], MOUNT_BIN [mount], MDADM_BIN [mdadm],
# NVME_BIN [nvme], SYSTEMCTL_BIN [systemctl], IMAGE_STORE_UNIT [dlami-nvme.service; empty: no wait],
# IMAGE_STORE_WAIT_S [120], IMAGE_STORE_POLL_S [2].
#
# The wait for the image's unit and device 0. are in scratch-image-store.sh, which this script sources from its
# own folder (it is not run on its own).
#
# Exit status: 0 mounted (or bound), already mounted, or no scratch device; 1 a present device could not
# be assembled, formatted, mounted or bound, or the image's unit still had the instance store (the bootstrap
# then abandons the launch).
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail

readonly MOUNT_POINT="${SCRATCH_MOUNT_POINT:-/scratch}"
readonly EBS_DEVICE="${SCRATCH_EBS_DEVICE:-/dev/sdb}"
readonly RAID_DEVICE="${SCRATCH_RAID_DEVICE:-/dev/md/gpu-scratch}"
readonly FSTAB="${FSTAB:-/etc/fstab}"
readonly PROC_MOUNTS="${PROC_MOUNTS:-/proc/mounts}"
readonly LSBLK_BIN="${LSBLK_BIN:-lsblk}"
readonly BLKID_BIN="${BLKID_BIN:-blkid}"
readonly MKFS_BIN="${MKFS_BIN:-mkfs.xfs}"
readonly MOUNT_BIN="${MOUNT_BIN:-mount}"
readonly MDADM_BIN="${MDADM_BIN:-mdadm}"
readonly NVME_BIN="${NVME_BIN:-nvme}"
readonly SYSTEMCTL_BIN="${SYSTEMCTL_BIN:-systemctl}"
readonly IMAGE_STORE_UNIT="${IMAGE_STORE_UNIT-dlami-nvme.service}"
readonly IMAGE_STORE_WAIT_S="${IMAGE_STORE_WAIT_S:-120}"
readonly IMAGE_STORE_POLL_S="${IMAGE_STORE_POLL_S:-2}"
readonly LABEL=gpu-scratch
readonly FSTAB_OPTIONS="defaults,noatime,nofail,x-systemd.device-timeout=30s"
readonly INSTANCE_STORE_MODEL="Amazon EC2 NVMe Instance Storage"
readonly EBS_MODEL="Amazon Elastic Block Store"
readonly IMAGE_SCRATCH_DIR=scratch
# The folder of the script itself: the image's instance store (its unit, its mount) is handled in
# scratch-image-store.sh beside it.
NODE_DIR="$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")" && pwd)"
readonly NODE_DIR

declare -A MODEL=() FSTYPE=() MOUNTED=() CHILDREN=() ARRAY_OF=() MOUNTED_CHILD=()
DISKS=()

log() {
  printf 'scratch: %s\n' "$*"
}

fail() {
  log "$*"
  exit 1
}

# field LINE KEY: the value of KEY="..." in one line of `lsblk -P`, trailing blanks trimmed.
field() {
  local value=""
  if [[ "$1" =~ (^|[[:space:]])$2=\"([^\"]*)\" ]]; then
    value="${BASH_REMATCH[2]}"
  fi
  value="${value%"${value##*[![:space:]]}"}"
  printf '%s' "$value"
}

read_devices() {
  local listing line name type parent
  MODEL=() FSTYPE=() MOUNTED=() CHILDREN=() ARRAY_OF=() MOUNTED_CHILD=() DISKS=()
  listing="$("$LSBLK_BIN" -p -n -P -o NAME,TYPE,PKNAME,MODEL,SERIAL,FSTYPE,MOUNTPOINT)" || fail "lsblk failed"
  while IFS= read -r line; do
    [[ -n "$line" ]] || continue
    name="$(field "$line" NAME)"
    type="$(field "$line" TYPE)"
    parent="$(field "$line" PKNAME)"
    MOUNTED["$name"]="$(field "$line" MOUNTPOINT)"
    if [[ -n "$parent" ]]; then
      CHILDREN["$parent"]=1
      [[ "$type" != raid* ]] || ARRAY_OF["$parent"]="$name"
      [[ -z "${MOUNTED[$name]}" ]] || MOUNTED_CHILD["$parent"]="$name"
    fi
    if [[ "$type" == disk && -z "$parent" ]]; then
      DISKS+=("$name")
      MODEL["$name"]="$(field "$line" MODEL)"
      FSTYPE["$name"]="$(field "$line" FSTYPE)"
    fi
  done <<<"$listing"
}

# The EC2 device name of an EBS NVMe disk (bytes 0-31 of the controller's vendor-specific data),
# without /dev/ and with xvd spelled sd; empty when nvme-cli cannot tell.
ebs_device_name() {
  local out hex name="" byte
  out="$("$NVME_BIN" id-ctrl -v "$1" 2>/dev/null)" || return 0
  hex="$(awk '/^vs\[\]:/ { getline; if ($1 == "0000:") { for (i = 2; i <= 17; i++) printf "%s ", $i } exit }' <<<"$out")"
  for byte in $hex; do
    [[ "$byte" =~ ^[0-9a-fA-F]{2}$ && "$byte" != 20 && "$byte" != 00 ]] || break
    printf -v name '%s\x'"$byte" "$name"
  done
  name="${name#/dev/}"
  printf '%s' "${name/#xvd/sd}"
}

# An EBS scratch volume left unused because the instance store is used instead: logged.
note_spare_ebs() {
  local spare
  spare="$(DEVICE="" && pick_ebs >/dev/null 2>&1 && printf '%s' "$DEVICE")" || spare=""
  [[ -z "$spare" ]] || log "EBS scratch volume ${spare} stays unused: the instance store is faster"
}

pick_instance_store() {
  local disk free=() members_raid=0 members_blank=0
  for disk in "${DISKS[@]}"; do
    [[ "${MODEL[$disk]}" == "$INSTANCE_STORE_MODEL" ]] || continue
    if [[ -n "${ARRAY_OF[$disk]:-}" && -z "${MOUNTED[${ARRAY_OF[$disk]}]:-}" ]]; then
      DEVICE="${ARRAY_OF[$disk]}"
      log "instance store array ${DEVICE} (assembled at boot) found"
      return 0
    fi
    [[ -z "${CHILDREN[$disk]:-}" && -z "${MOUNTED[$disk]}" ]] || continue
    free+=("$disk")
    case "${FSTYPE[$disk]}" in
      linux_raid_member) members_raid=$((members_raid + 1)) ;;
      "") members_blank=$((members_blank + 1)) ;;
      *) ;;
    esac
  done
  ((${#free[@]} > 0)) || return 1
  log "NVMe instance store: ${free[*]}"
  if ((${#free[@]} == 1)); then
    DEVICE="${free[0]}"
  elif ! command -v "$MDADM_BIN" >/dev/null 2>&1; then
    DEVICE="${free[0]}"
    log "no mdadm: using ${DEVICE} alone; ${free[*]:1} stay unused"
  elif ((members_raid == ${#free[@]})); then
    log "\$ ${MDADM_BIN} --assemble ${RAID_DEVICE} ${free[*]}"
    "$MDADM_BIN" --assemble "$RAID_DEVICE" "${free[@]}" 2>&1 || fail "cannot assemble ${RAID_DEVICE} from ${free[*]}"
    DEVICE="$RAID_DEVICE"
  elif ((members_blank == ${#free[@]})); then
    log "\$ ${MDADM_BIN} --create ${RAID_DEVICE} --run --level=0 --raid-devices=${#free[@]} ${free[*]}"
    "$MDADM_BIN" --create "$RAID_DEVICE" --run --level=0 --raid-devices="${#free[@]}" "${free[@]}" 2>&1 ||
      fail "cannot create RAID 0 ${RAID_DEVICE} from ${free[*]}"
    DEVICE="$RAID_DEVICE"
  else
    fail "instance store disks ${free[*]} carry different signatures; refusing to build an array over data"
  fi
}

pick_ebs() {
  local disk name wanted="${EBS_DEVICE#/dev/}" candidates=() named=() unnamed=0
  wanted="${wanted/#xvd/sd}"
  for disk in "${DISKS[@]}"; do
    [[ "${MODEL[$disk]}" == "$EBS_MODEL" && -z "${CHILDREN[$disk]:-}" && -z "${MOUNTED[$disk]}" ]] || continue
    candidates+=("$disk")
    name="$(ebs_device_name "$disk")"
    if [[ -z "$name" ]]; then
      unnamed=$((unnamed + 1))
    elif [[ "$name" == "$wanted" ]]; then
      named+=("$disk")
    else
      log "EBS disk ${disk} is ${name}, not ${EBS_DEVICE}: left alone"
    fi
  done
  if ((${#named[@]} > 0)); then
    DEVICE="${named[0]}"
    log "EBS scratch volume ${EBS_DEVICE} is ${DEVICE}"
  elif ((unnamed == 0)); then
    return 1
  elif ((${#candidates[@]} == 1)); then
    DEVICE="${candidates[0]}"
    log "EBS device names unreadable (nvme-cli): ${DEVICE} is the only unused EBS disk"
  else
    fail "EBS device names unreadable (nvme-cli) and several unused EBS disks (${candidates[*]}): which one is ${EBS_DEVICE} is unknown"
  fi
}

# blkid_value DEVICE TAG: the tag of the file system on DEVICE; status 2 when there is none.
blkid_value() {
  "$BLKID_BIN" -p -o value -s "$2" "$1"
}

# The fstab line for the mount point (none when ENTRY is empty), replacing an earlier one; rewritten whole.
write_fstab() {
  local entry="$1" kept tmp
  if [[ "$(awk -v mp="$MOUNT_POINT" '$1 !~ /^#/ && $2 == mp' "$FSTAB" 2>/dev/null)" == "$entry" ]]; then
    [[ -z "$entry" ]] || log "${FSTAB} already mounts ${MOUNT_POINT}: ${entry}"
    return 0
  fi
  kept="$(awk -v mp="$MOUNT_POINT" '$1 ~ /^#/ || $2 != mp' "$FSTAB" 2>/dev/null)" || kept=""
  tmp="$(mktemp "${FSTAB}.XXXXXX")" || fail "cannot write ${FSTAB}"
  if printf '%s\n' "${kept}${entry:+${kept:+$'\n'}${entry}}" >"$tmp" && chmod 0644 -- "$tmp" && mv -f -- "$tmp" "$FSTAB"; then
    log "${FSTAB}: ${entry:-no line for ${MOUNT_POINT} any more (the image mounts the instance store)}"
    return 0
  fi
  rm -f -- "$tmp"
  fail "cannot write ${FSTAB}"
}

# has_instance_store, wait_for_image_store, find_image_mount, bind_image_mount
# shellcheck source=scratch-image-store.sh source-path=SCRIPTDIR
source "${NODE_DIR}/scratch-image-store.sh"

main() {
  local source fs_type uuid rc
  source="$(awk -v mp="$MOUNT_POINT" '$2 == mp { print $1; exit }' "$PROC_MOUNTS")" || fail "cannot read ${PROC_MOUNTS}"
  if [[ -n "$source" ]]; then
    chmod 1777 -- "$MOUNT_POINT" || fail "cannot set mode 1777 on ${MOUNT_POINT}"
    log "${source} is already mounted at ${MOUNT_POINT}"
    return 0
  fi

  read_devices
  wait_for_image_store
  DEVICE=""
  if find_image_mount; then
    note_spare_ebs
    bind_image_mount
    return 0
  fi
  if pick_instance_store; then
    note_spare_ebs
  elif ! pick_ebs; then
    log "no scratch device (no NVMe instance store, no EBS volume ${EBS_DEVICE}): nothing to do"
    return 0
  fi

  rc=0
  fs_type="$(blkid_value "$DEVICE" TYPE)" || rc=$?
  if ((rc == 2)) || [[ -z "$fs_type" ]]; then
    command -v "$MKFS_BIN" >/dev/null 2>&1 || fail "${MKFS_BIN} not found (xfsprogs): the image must install it"
    log "no file system on ${DEVICE}: \$ ${MKFS_BIN} -K -L ${LABEL} ${DEVICE}"
    "$MKFS_BIN" -K -L "$LABEL" "$DEVICE" 2>&1 || fail "cannot format ${DEVICE}"
    fs_type="$(blkid_value "$DEVICE" TYPE)" || fail "no file system on ${DEVICE} after formatting it"
  elif ((rc != 0)); then
    fail "blkid cannot read ${DEVICE} (status ${rc})"
  else
    log "${DEVICE} holds a ${fs_type} file system: kept as it is"
  fi
  uuid="$(blkid_value "$DEVICE" UUID)" && [[ -n "$uuid" ]] || fail "no UUID for the file system on ${DEVICE}"

  mkdir -p -- "$MOUNT_POINT" || fail "cannot create ${MOUNT_POINT}"
  log "\$ ${MOUNT_BIN} -t ${fs_type} -o defaults,noatime ${DEVICE} ${MOUNT_POINT}"
  "$MOUNT_BIN" -t "$fs_type" -o defaults,noatime "$DEVICE" "$MOUNT_POINT" 2>&1 || fail "cannot mount ${DEVICE} at ${MOUNT_POINT}"
  chmod 1777 -- "$MOUNT_POINT" || fail "cannot set mode 1777 on ${MOUNT_POINT}"
  write_fstab "UUID=${uuid} ${MOUNT_POINT} ${fs_type} ${FSTAB_OPTIONS} 0 0"
  log "${DEVICE} (${fs_type}, UUID ${uuid}) mounted at ${MOUNT_POINT}, mode 1777"
}

main "$@"
