# install_at UPSTREAM PACKAGE...: installs each PACKAGE at UPSTREAM unless it is there already, and refuses to
# downgrade one (`apt-get -y` would refuse too, less clearly). The Debian version is looked up with resolve
# (lib/resolve.sh); installed_version, upstream_of and at_least come from lib/adopt.sh: both are included first.
# APT_INSTALL_FLAGS replaces --no-install-recommends. The caller defines fail().
install_at() {
  local want="$1" package have version specs=()
  shift
  for package in "$@"; do
    have="$(upstream_of "$(installed_version "${package}")")"
    [[ "${have}" != "${want}" ]] || continue
    [[ -z "${have}" ]] || at_least "${want}" "${have}" \
      || fail "${package} ${have} is installed and newer than ${want}: installing ${want} would downgrade it; fix: raise the pin to ${have} or use another parent image"
    version="$(resolve "${package}" "${want}")"
    specs+=("${package}=${version}")
  done
  if [[ "${#specs[@]}" -gt 0 ]]; then
    # shellcheck disable=SC2086 # the flags are words
    apt-get -o DPkg::Lock::Timeout=600 install -y ${APT_INSTALL_FLAGS:---no-install-recommends} "${specs[@]}"
  fi
}
