# pcs_release FILE VERSION_KEY RELEASE_KEY: VERSION-RELEASE of what one of AWS's PCS installers left on the image, read
# from the version file it writes (KEY='value' lines): /opt/aws/pcs/version (AGENT_VERSION, AGENT_RELEASE) for the
# agent, /opt/aws/pcs/scheduler/slurm-MAJOR.MINOR/version (SLURM_VERSION, PCS_SLURM_RELEASE) for PCS's Slurm build.
# Empty where the file or either key is missing. VERSION-RELEASE is how AWS names its installer files and how the
# config pins them (PcsAgentVersion, PcsSlurmVersion), and dpkg orders it (lib/adopt.sh at_least).
pcs_release() {
  local version release
  [[ -r "$1" ]] || return 0
  version="$(sed -n "s/^$2='\{0,1\}\([^']*\)'\{0,1\}$/\1/p" "$1")"
  release="$(sed -n "s/^$3='\{0,1\}\([^']*\)'\{0,1\}$/\1/p" "$1")"
  if [[ -n "${version}" && -n "${release}" ]]; then echo "${version}-${release}"; fi
}
