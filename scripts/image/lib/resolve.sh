# resolve PACKAGE UPSTREAM: the newest Debian version of PACKAGE whose upstream part is UPSTREAM
# (the Debian revision differs between repositories, so it is looked up with apt-cache madison).
# The caller defines fail(). Not run on its own: each component script that needs it says
# "# include: lib/resolve.sh", and the document Image Builder receives carries this function
# there (config/image_components.py, document()); its opening comment block is left out.
resolve() {
  local pkg="$1" upstream="$2" found
  found="$(apt-cache madison "${pkg}" | awk -F'|' -v want="${upstream}-" \
    '{ v = $2; gsub(/[[:space:]]/, "", v); u = v; sub(/^[0-9]+:/, "", u); if (index(u, want) == 1) { print v; exit } }')"
  [[ -n "${found}" ]] || fail "apt offers no ${pkg} at version ${upstream}; offered: $(apt-cache madison "${pkg}" | awk -F'|' '{ printf "%s", $2 }')"
  echo "${found}"
}
