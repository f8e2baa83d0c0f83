# configure_nvidia_repo: NVIDIA's CUDA apt repository for the image's OS (lib/node-os.sh, included before this),
# unless the parent image already has it (a second entry with another Signed-By makes apt refuse to run), and
# NVIDIA's builds preferred over Ubuntu's same-named packages. Priority 600 is below 1000: it never makes apt
# downgrade an installed package. Paths are under GPU_PLATFORM_ROOT (tests only).
configure_nvidia_repo() {
  local root="${GPU_PLATFORM_ROOT:-}" repo="${node_os_id}${node_os_version//./}"
  local url="https://developer.download.nvidia.com/compute/cuda/repos/${repo}/x86_64/"
  if ! grep -rqsF -- "${url%/}" "${root}/etc/apt/sources.list" "${root}/etc/apt/sources.list.d"; then
    curl -fsSL --retry 5 "${url}3bf863cc.pub" | gpg --dearmor --yes -o "${root}/usr/share/keyrings/cuda-archive-keyring.gpg"
    echo "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] ${url} /" \
      > "${root}/etc/apt/sources.list.d/cuda-${repo}-x86_64.list"
  fi
  printf 'Package: *\nPin: origin developer.download.nvidia.com\nPin-Priority: 600\n' \
    > "${root}/etc/apt/preferences.d/gpu-platform-nvidia-origin"
  apt-get -o DPkg::Lock::Timeout=600 update
}
