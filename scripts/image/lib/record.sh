# The versions the image carries, in one JSON file (config/image_components.py IMAGE_VERSIONS_FILE; the node side
# reads it): a build step records what it installed or kept from the parent image (record KEY VALUE), and the
# validate and test steps check the system against that record (lib/recorded.sh), not against the config's pins.
# Paths are under GPU_PLATFORM_ROOT, which only the tests set.
record() {
  local file="${GPU_PLATFORM_ROOT:-}/opt/gpu-platform/image-versions.json"
  install -d -m 0755 "${file%/*}"
  python3 -c 'import json, os, sys
path, key, value = sys.argv[1:]
data = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
data[key] = value
open(path, "w", encoding="utf-8").write(json.dumps(data, indent=2, sort_keys=True) + "\n")' "${file}" "$1" "$2"
  echo "The image carries ${1} ${2} (/opt/gpu-platform/image-versions.json)"
}
