# The CUDA toolkits under /usr/local: cuda-MAJOR.MINOR folders, several side by side on a Deep Learning AMI parent,
# where no dpkg package owns them (the AMI's release notes list them as nvidia_cuda_stack, its default_cuda being
# where /usr/local/cuda points).
# toolkit_version DIR: the CUDA version of the toolkit in DIR: dpkg's cuda-toolkit-MAJOR-MINOR where that package is
# installed, else what CUDA's own DIR/version.json says ("cuda": {"name": "CUDA SDK", "version": ...}; a runfile's
# third number may be a build date, which sorts above any patch: such a toolkit is never taken for older than a
# pin of its minor), else MAJOR.MINOR from the folder's name. Needs lib/adopt.sh (installed_version, upstream_of).
toolkit_version() {
  local minor="${1##*/cuda-}" version
  version="$(upstream_of "$(installed_version "cuda-toolkit-${minor//./-}")")"
  [[ -n "${version}" ]] \
    || version="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cuda"]["version"])' "$1/version.json" 2>/dev/null || true)"
  echo "${version:-${minor}}"
}
