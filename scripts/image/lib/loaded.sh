# loaded_library SONAME: the file a program loads for SONAME (libnccl.so.2) where nothing of its own (LD_LIBRARY_PATH, an
# rpath) says otherwise: the first entry of the dynamic linker's cache as `ldconfig -p` lists it, as a real path
# (libnccl.so.2 -> .../libnccl.so.2.30.7, whose name ends in the library's version); empty when the cache has none.
# The listing is read whole (no early exit: a closed pipe would fail the step under pipefail). Paths are under
# GPU_PLATFORM_ROOT, which only the tests set.
loaded_library() {
  local file
  file="$(ldconfig -p | awk -v soname="$1" '!found && $1 == soname { print $NF; found = 1 }')"
  [[ -z "${file}" ]] || readlink -f "${GPU_PLATFORM_ROOT:-}${file}"
}
