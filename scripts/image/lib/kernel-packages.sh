# kernel_packages: the installed packages that keep the image on the running kernel, one a line: the running
# kernel's own (linux-image-, linux-headers-, linux-modules-...RELEASE) and those of its flavour (RELEASE's last word,
# aws: linux-aws, linux-image-aws, linux-headers-aws, ..., the metapackages that pull a newer kernel in).
kernel_packages() {
  local kernel flavour
  kernel="$(uname -r)"
  flavour="${kernel##*-}"
  dpkg-query -W -f='${Package} ${Status}\n' 'linux-*' 2>/dev/null \
    | awk -v kernel="${kernel}" -v flavour="${flavour}" \
      '$NF == "installed" && (index($1, kernel) || $1 ~ ("-" flavour "(-|$)")) { print $1 }'
}
