# recorded KEY: the version of KEY the image carries, as a build step recorded it (lib/record.sh). The caller
# defines fail(). Paths are under GPU_PLATFORM_ROOT, which only the tests set.
recorded() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1], encoding="utf-8"))[sys.argv[2]])' \
    "${GPU_PLATFORM_ROOT:-}/opt/gpu-platform/image-versions.json" "$1" 2>/dev/null \
    || fail "/opt/gpu-platform/image-versions.json records no ${1}: the build step that installs it did not run"
}
