# What the parent image already carries, and installs that never downgrade it. A pin in the config is a floor:
# a parent package at the pin or newer is kept (adopted), an older or missing one gets the pin.
# installed_version PACKAGE: dpkg's version of PACKAGE, empty when it is not installed.
# upstream_of VERSION: VERSION without its epoch and Debian revision (1:4.7.0-1 -> 4.7.0).
# at_least A B: true when version A >= B (dpkg's ordering).
# adopted PACKAGE PIN: the upstream version to carry: the installed one when it is PIN or newer, else PIN.
installed_version() {
  dpkg-query -W -f="\${Status} \${Version}\n" "$1" 2>/dev/null | awk '$3 == "installed" { print $4; exit }' || true
}
upstream_of() {
  local version="${1#*:}"
  echo "${version%-*}"
}
at_least() {
  dpkg --compare-versions "$1" ge "$2"
}
adopted() {
  local have
  have="$(upstream_of "$(installed_version "$1")")"
  if [[ -n "${have}" ]] && at_least "${have}" "$2"; then echo "${have}"; else echo "$2"; fi
}
