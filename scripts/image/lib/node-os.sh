# The operating system of the golden image: scripts/node/layout.py NODE_OS, where it is decided (the tests in
# tests/scripts/image keep these values equal to it). Ubuntu's codename names the apt suites (AWS's Lustre client
# repository), the version without its dot names NVIDIA's CUDA repository (ubuntu2404).
# require_node_os: fails unless /etc/os-release says this OS and the machine is x86_64. Paths are under
# GPU_PLATFORM_ROOT, which only the tests set (a fake root). The caller defines fail().
node_os_id="ubuntu"
node_os_version="24.04"
node_os_codename="noble"
require_node_os() {
  local release="${GPU_PLATFORM_ROOT:-}/etc/os-release" line
  for line in "ID=${node_os_id}" "VERSION_ID=\"${node_os_version}\"" "VERSION_CODENAME=${node_os_codename}"; do
    grep -qx -- "${line}" "${release}" \
      || fail "the parent image is not ${node_os_id} ${node_os_version} ($(grep -s '^PRETTY_NAME=' "${release}" | cut -d= -f2-)); fix: set image.parent_image_parameter to an Ubuntu ${node_os_version} x86_64 AMI"
  done
  [[ "$(uname -m)" == "x86_64" ]] \
    || fail "the parent image is $(uname -m); fix: set image.parent_image_parameter to an x86_64 AMI"
}
