#!/usr/bin/env bash
# The Lustre client for mount-lustre.sh, which sources this file from its own folder: require_lustre_client exits
# 69 unless the client's mount helper (mount.lustre, MOUNT_LUSTRE_BIN) is there or could be installed. On the
# golden AMI (IMAGE_VERSIONS_FILE present) a missing client is a broken image; with FSX_CLIENT_INSTALL=off nothing
# is installed; on any other image install_lustre_client installs lustre-client-modules-$(uname -r) from AWS's
# FSx Lustre apt repository, bounded by KEY_TIMEOUT_S, UPDATE_TIMEOUT_S and INSTALL_TIMEOUT_S. What and why are
# described at the top of mount-lustre.sh ("No Lustre client").
#
# The settings (lustre_helper, image_versions, client_install, apt_get, curl_bin, gpg_bin, apt_keyring, apt_list,
# mount_bin, the repository, its key and the timeouts) and the helpers (log, die, one_line) are mount-lustre.sh's.
# shellcheck disable=SC2154  # they are assigned in mount-lustre.sh (set -u there stops on any that is not)

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
  fi
  echo "lustre-client-install.sh is sourced by mount-lustre.sh; run mount-lustre.sh" >&2
  exit 2
fi

lustre_client_installed() {
  PATH="${PATH}:/sbin:/usr/sbin" command -v "$lustre_helper" >/dev/null 2>&1
}

# The client from AWS's repository (see the header); on failure INSTALL_ERROR says what went wrong.
install_lustre_client() {
  local kernel="${KERNEL_RELEASE:-$(uname -r)}" codename output
  local package="lustre-client-modules-${kernel}"
  codename="$(sed -n -E 's/^VERSION_CODENAME="?([a-z]+)"?$/\1/p' "${OS_RELEASE:-/etc/os-release}" 2>/dev/null)" || codename=""
  if [[ -z "$codename" ]]; then
    INSTALL_ERROR="no VERSION_CODENAME in ${OS_RELEASE:-/etc/os-release}"
    return 1
  fi
  log "no Lustre client on this image (not the golden AMI): installing ${package} from ${FSX_REPO_URL} ${codename}"
  mkdir -p -- "$(dirname -- "$apt_keyring")" "$(dirname -- "$apt_list")" 2>/dev/null || true
  if ! output="$(timeout "$KEY_TIMEOUT_S" "$curl_bin" -fsSL --retry 2 -o "${apt_keyring}.asc" "$FSX_KEY_URL" 2>&1 &&
    "$gpg_bin" --dearmor --yes -o "$apt_keyring" "${apt_keyring}.asc" 2>&1)"; then
    rm -f -- "${apt_keyring}.asc"
    INSTALL_ERROR="cannot fetch the repository's key ${FSX_KEY_URL}$(one_line "$output")"
    return 1
  fi
  rm -f -- "${apt_keyring}.asc"
  chmod 0644 -- "$apt_keyring" 2>/dev/null || true
  printf 'deb [signed-by=%s] %s %s main\n' "$apt_keyring" "$FSX_REPO_URL" "$codename" >"$apt_list"
  # This repository's index only: another that the node cannot reach must not fail or stall the install.
  if ! output="$(timeout "$UPDATE_TIMEOUT_S" "$apt_get" -o DPkg::Lock::Timeout=30 -o "Dir::Etc::sourcelist=${apt_list}" \
    -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 update 2>&1)"; then
    INSTALL_ERROR="apt-get update of ${FSX_REPO_URL} failed$(one_line "$output")"
    return 1
  fi
  if ! output="$(DEBIAN_FRONTEND=noninteractive timeout "$INSTALL_TIMEOUT_S" "$apt_get" -o DPkg::Lock::Timeout=30 \
    install -y --no-install-recommends "$package" 2>&1)"; then
    INSTALL_ERROR="apt-get install ${package} failed$(one_line "$output")"
    return 1
  fi
  if ! lustre_client_installed; then
    INSTALL_ERROR="${package} is installed but there is still no ${lustre_helper}"
    return 1
  fi
  log "installed ${package}"
}

# Exit 69 unless a Lustre client is there, or could be installed (see the header).
require_lustre_client() {
  if [[ "$mount_bin" != mount && -z "${MOUNT_LUSTRE_BIN:-}" ]] || lustre_client_installed; then
    return 0
  fi
  if [[ -e "$image_versions" ]]; then
    die "$EX_UNAVAILABLE" "no Lustre client: ${lustre_helper} is not installed, but this is the golden AMI (${image_versions}), which must carry it; fix: rebuild the image (its lustre-client component)"
  fi
  if [[ "$client_install" == off ]]; then
    die "$EX_UNAVAILABLE" "no Lustre client: ${lustre_helper} is not installed (FSX_CLIENT_INSTALL=off); fix: launch the golden AMI, which carries it"
  fi
  INSTALL_ERROR=""
  install_lustre_client ||
    die "$EX_UNAVAILABLE" "no Lustre client: ${lustre_helper} is not installed and installing it failed: ${INSTALL_ERROR}; fix: launch the golden AMI (it carries the client), or let the nodes reach ${FSX_REPO_URL}"
}
