#!/usr/bin/env bash
# Mount the platform's FSx for Lustre file system at boot, retrying while the network or the
# file system is not ready yet. lustre-mount.service runs this; the node bootstrap waits for
# that unit and abandons the launch lifecycle hook when it fails (the group replaces the node).
#
# Environment (the unit reads /etc/gpu-platform/node.env); each has a flag that overrides it:
#   FSX_DNS_NAME              --dns-name      file system DNSName, fs-<id>.fsx.<region>.amazonaws.com
#   FSX_MOUNT_NAME            --mount-name    LustreConfiguration.MountName: 8 lowercase letters or
#                                             digits, or "fsx" for SCRATCH_1 file systems
#   FSX_MOUNT_POINT           --mount-point   absolute path (default /fsx); created when missing
#   FSX_MOUNT_RETRIES         --retries       mount attempts in all (default 10)
#   FSX_MOUNT_RETRY_DELAY     --retry-delay   whole seconds before the 2nd attempt (default 15);
#                                             doubles after each failure, up to the cap
#   FSX_MOUNT_RETRY_DELAY_MAX                 cap on that delay (default 60)
#   FSX_MOUNT_ATTEMPT_TIMEOUT                 seconds one attempt may take before it is killed
#                                             (default 60; 0: no limit)
#   MOUNT_BIN                 mount program (default mount); tests put a fake one here
#   PROC_MOUNTS               mount table read to decide "already mounted" (default /proc/mounts)
#   MOUNT_LUSTRE_BIN          the Lustre client's mount helper (default mount.lustre, looked up on PATH
#                             and /sbin, /usr/sbin); checked when MOUNT_BIN is mount, or when given
# --print-only validates, prints the mount command that would run and exits; it needs no root.
#
# No Lustre client (no mount.lustre): the golden AMI carries one at the pinned version (its lustre-client
# component; the image records it in IMAGE_VERSIONS_FILE, /opt/gpu-platform/image-versions.json), so there its
# absence is a broken image: exit 69. Any other image (the public Deep Learning AMI the fleets launch until the
# first golden AMI exists; nothing says it ships the FSx client) gets it installed here, as AWS's FSx guide does
# it: AWS's FSx Lustre apt repository (its key, dearmored, signs it), the suite of the OS's codename, and the
# module package of the running kernel, lustre-client-modules-$(uname -r) (its utilities come with it). Bounded:
# the key KEY_TIMEOUT_S, the repository's index UPDATE_TIMEOUT_S (only that repository is refreshed), the install
# INSTALL_TIMEOUT_S. A node with no route to the repository, or a kernel it has no module for, exits 69 (the
# bootstrap then goes on without the file system on such an image, and says so). FSX_CLIENT_INSTALL=off: never
# install. Tests move the rest: IMAGE_VERSIONS_FILE, KERNEL_RELEASE, OS_RELEASE [/etc/os-release], APT_GET_BIN,
# CURL_BIN, GPG_BIN, FSX_APT_KEYRING [/usr/share/keyrings/fsx-ubuntu-public-key.gpg], FSX_APT_LIST
# [/etc/apt/sources.list.d/fsxlustreclientrepo.list]. The check and the install are in lustre-client-install.sh,
# which this script sources from its own folder (it is not run on its own).
#
# Exit status: 0 mounted (or already mounted); 64 bad or missing input; 69 no Lustre client
# (mount.lustre) installed, and none could be installed; 73 the mount point cannot be created; 75 every
# attempt failed; 78 something other than this file system is already mounted at the mount point.
set -euo pipefail

readonly EX_USAGE=64 EX_UNAVAILABLE=69 EX_CANTCREAT=73 EX_TEMPFAIL=75 EX_CONFIG=78
# AWS's FSx for Lustre client repository for Ubuntu and the key that signs it (the image's lustre-client component
# uses the same two).
readonly FSX_REPO_URL="https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu"
readonly FSX_KEY_URL="https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc"
readonly KEY_TIMEOUT_S=30 UPDATE_TIMEOUT_S=60 INSTALL_TIMEOUT_S=180
# The options AWS documents for FSx for Lustre clients: relatime keeps atime cheap, flock
# gives file locks that are coherent across all clients.
readonly MOUNT_OPTIONS="relatime,flock"
# The folder of the script itself: the Lustre client's check and install are in lustre-client-install.sh beside it.
NODE_DIR="$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")" && pwd)"
readonly NODE_DIR

dns_name="${FSX_DNS_NAME:-}"
mount_name="${FSX_MOUNT_NAME:-}"
mount_point="${FSX_MOUNT_POINT:-/fsx}"
retries="${FSX_MOUNT_RETRIES:-10}"
retry_delay="${FSX_MOUNT_RETRY_DELAY:-15}"
retry_delay_max="${FSX_MOUNT_RETRY_DELAY_MAX:-60}"
attempt_timeout="${FSX_MOUNT_ATTEMPT_TIMEOUT:-60}"
mount_bin="${MOUNT_BIN:-mount}"
proc_mounts="${PROC_MOUNTS:-/proc/mounts}"
lustre_helper="${MOUNT_LUSTRE_BIN:-mount.lustre}"
image_versions="${IMAGE_VERSIONS_FILE:-/opt/gpu-platform/image-versions.json}"
client_install="${FSX_CLIENT_INSTALL:-auto}"
apt_get="${APT_GET_BIN:-apt-get}"
curl_bin="${CURL_BIN:-curl}"
gpg_bin="${GPG_BIN:-gpg}"
apt_keyring="${FSX_APT_KEYRING:-/usr/share/keyrings/fsx-ubuntu-public-key.gpg}"
apt_list="${FSX_APT_LIST:-/etc/apt/sources.list.d/fsxlustreclientrepo.list}"
print_only=0
# What an error message calls each input: the variable, or the flag when one was given.
dns_label=FSX_DNS_NAME mount_name_label=FSX_MOUNT_NAME mount_point_label=FSX_MOUNT_POINT
retries_label=FSX_MOUNT_RETRIES retry_delay_label=FSX_MOUNT_RETRY_DELAY

log() {
  printf 'mount-lustre: %s\n' "$*" >&2
}

die() {
  local status="$1"
  shift
  log "$*"
  exit "$status"
}

usage() {
  cat <<'EOF'
usage: mount-lustre.sh [--dns-name NAME] [--mount-name NAME] [--mount-point DIR]
                       [--retries N] [--retry-delay SECONDS] [--print-only]
Mounts FSx for Lustre: mount -t lustre -o relatime,flock NAME@tcp:/MOUNTNAME DIR.
Flags override FSX_DNS_NAME, FSX_MOUNT_NAME, FSX_MOUNT_POINT, FSX_MOUNT_RETRIES and
FSX_MOUNT_RETRY_DELAY; see the header of this script or scripts/node/README.md.
Exit: 0 mounted, 64 bad input, 69 no Lustre client, 73 no mount point, 75 all attempts
failed, 78 another file system is mounted there.
EOF
}

parse_args() {
  while (($#)); do
    case "$1" in
      --print-only) print_only=1 ;;
      -h | --help)
        usage
        exit 0
        ;;
      --dns-name | --mount-name | --mount-point | --retries | --retry-delay)
        (($# >= 2)) || die "$EX_USAGE" "$1 needs a value"
        case "$1" in
          --dns-name) dns_name="$2" dns_label="$1" ;;
          --mount-name) mount_name="$2" mount_name_label="$1" ;;
          --mount-point) mount_point="$2" mount_point_label="$1" ;;
          --retries) retries="$2" retries_label="$1" ;;
          --retry-delay) retry_delay="$2" retry_delay_label="$1" ;;
        esac
        shift
        ;;
      *) die "$EX_USAGE" "unknown argument '$1' (see --help)" ;;
    esac
    shift
  done
}

# Every problem on its own line, then exit 64 if there was one.
validate() {
  local bad=0
  if [[ -z "$dns_name" ]]; then
    log "${dns_label} is not set: give the file system's DNSName, e.g. fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
    bad=1
  elif [[ ! "$dns_name" =~ ^fs-[0-9a-f]{8,}\.fsx\.[a-z]{2}(-[a-z]+)+-[0-9]+\.amazonaws\.com(\.cn)?$ ]]; then
    log "${dns_label} '${dns_name}' is not an FSx for Lustre DNS name (fs-<id>.fsx.<region>.amazonaws.com)"
    bad=1
  fi
  if [[ -z "$mount_name" ]]; then
    log "${mount_name_label} is not set: give the file system's LustreConfiguration.MountName"
    bad=1
  elif [[ ! "$mount_name" =~ ^([a-z0-9]{8}|fsx)$ ]]; then
    log "${mount_name_label} '${mount_name}' is not an FSx mount name (8 lowercase letters or digits, or fsx for SCRATCH_1)"
    bad=1
  fi
  # Strip trailing slashes so the path compares equal to the mount table's entry.
  while [[ "$mount_point" == ?*/ ]]; do
    mount_point="${mount_point%/}"
  done
  if [[ ! "$mount_point" =~ ^(/[A-Za-z0-9._-]+)+$ || "$mount_point" =~ /\.\.?(/|$) ]]; then
    log "${mount_point_label} '${mount_point}' must be an absolute path of letters, digits, '.', '_' and '-', e.g. /fsx"
    bad=1
  fi
  if [[ ! "$retries" =~ ^[0-9]+$ ]] || ((10#$retries < 1)); then
    log "${retries_label} '${retries}' must be a whole number of attempts, 1 or more"
    bad=1
  fi
  if [[ "$client_install" != auto && "$client_install" != off ]]; then
    log "FSX_CLIENT_INSTALL '${client_install}' must be auto or off"
    bad=1
  fi
  local name value
  for name in retry_delay retry_delay_max attempt_timeout; do
    value="${!name}"
    if [[ ! "$value" =~ ^[0-9]+$ ]]; then
      case "$name" in
        retry_delay) name="$retry_delay_label" ;;
        retry_delay_max) name=FSX_MOUNT_RETRY_DELAY_MAX ;;
        attempt_timeout) name=FSX_MOUNT_ATTEMPT_TIMEOUT ;;
      esac
      log "${name} '${value}' must be whole seconds, 0 or more"
      bad=1
    fi
  done
  if ((bad)); then
    exit "$EX_USAGE"
  fi
  retries=$((10#$retries))
  retry_delay=$((10#$retry_delay))
  retry_delay_max=$((10#$retry_delay_max))
  attempt_timeout=$((10#$attempt_timeout))
}

# "source fstype" of the last entry mounted on $mount_point (the one in use), or nothing.
mounted_at_mount_point() {
  local source target fstype rest found=""
  while read -r source target fstype rest; do
    if [[ "$target" == "$mount_point" ]]; then
      found="${source} ${fstype}"
    fi
  done <"$proc_mounts"
  printf '%s' "$found"
}

# The mount table shows the server's NID (an IP address), not the DNS name: match on the type
# and the mount name.
is_our_mount() {
  local source="${1%% *}" fstype="${1##* }"
  [[ "$fstype" == lustre && "$source" == *@tcp*:/"$mount_name" ]]
}

# ": " and the last 3 non-empty lines of $1 joined with "; ", or nothing when $1 is blank.
one_line() {
  local -a lines=()
  local joined
  mapfile -t lines < <(printf '%s\n' "$1" | sed -e '/^[[:space:]]*$/d' | tail -n 3)
  if ((${#lines[@]})); then
    printf -v joined '%s; ' "${lines[@]}"
    printf ': %s' "${joined%; }"
  fi
}

# lustre_client_installed, install_lustre_client, require_lustre_client
# shellcheck source=lustre-client-install.sh source-path=SCRIPTDIR
source "${NODE_DIR}/lustre-client-install.sh"

main() {
  parse_args "$@"
  validate

  local device="${dns_name}@tcp:/${mount_name}"
  local -a command=("$mount_bin" -t lustre -o "$MOUNT_OPTIONS" "$device" "$mount_point")
  if ((print_only)); then
    printf '%s\n' "${command[*]}"
    return 0
  fi

  [[ -r "$proc_mounts" ]] || die "$EX_USAGE" "cannot read the mount table ${proc_mounts}"
  local current
  current="$(mounted_at_mount_point)"
  if [[ -n "$current" ]]; then
    if is_our_mount "$current"; then
      log "${mount_point} is already mounted (${current%% *}); nothing to do"
      return 0
    fi
    die "$EX_CONFIG" "${mount_point} already has a ${current##* } mount of ${current%% *}; expected lustre ${device}"
  fi

  require_lustre_client
  mkdir -p -- "$mount_point" 2>/dev/null || die "$EX_CANTCREAT" "cannot create the mount point ${mount_point}"

  local limit="of ${attempt_timeout} s at most"
  ((attempt_timeout > 0)) || limit="with no time limit"
  log "mounting ${device} on ${mount_point}: up to ${retries} attempts ${limit}, ${retry_delay} s apart doubling to ${retry_delay_max} s"
  local attempt=1 delay="$retry_delay" output status last_error=""
  while :; do
    status=0
    output="$(timeout --kill-after=5 "$attempt_timeout" "${command[@]}" 2>&1)" || status=$?
    if ((status == 0)); then
      current="$(mounted_at_mount_point)"
      if [[ -n "$current" ]] && is_our_mount "$current"; then
        log "mounted ${device} on ${mount_point} (attempt ${attempt}/${retries})"
        return 0
      fi
      last_error="mount exited 0 but ${mount_point} is not a lustre mount of ${mount_name} in ${proc_mounts}"
    elif ((status == 124 || status == 137)); then
      last_error="mount timed out after ${attempt_timeout} s"
    else
      last_error="mount exited ${status}$(one_line "$output")"
    fi
    if ((attempt >= retries)); then
      break
    fi
    if ((delay > retry_delay_max)); then
      delay="$retry_delay_max"
    fi
    log "attempt ${attempt}/${retries} failed (${last_error}); next in ${delay} s"
    if ((delay > 0)); then
      sleep "$delay"
    fi
    delay=$((delay * 2))
    attempt=$((attempt + 1))
  done
  die "$EX_TEMPFAIL" "giving up: could not mount ${device} on ${mount_point} in ${retries} attempts; last: ${last_error}"
}

main "$@"
