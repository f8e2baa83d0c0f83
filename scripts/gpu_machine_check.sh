#!/usr/bin/env bash
# Record what the node code sees on a real NVIDIA GPU machine, into a folder (fixtures and evidence):
#
#   bash scripts/gpu_machine_check.sh OUT_DIR
#
#   machine.txt        date, kernel, driver (nvidia-smi --version), Python, torch
#   nvidia-smi.out/.rc the health check's own nvidia-smi query (health.probe.NVIDIA_SMI_COMMAND)
#   nvidia-smi-q.xml   nvidia-smi -q -x
#   dcgm-diag-r1.json  dcgmi diag -r 1 -j, where DCGM is installed (else dcgm.txt says it is not)
#   imports.txt        every node module imported by this machine's python3 (the node's Python version?)
#   selftest.txt       scripts/node/selftest.py with the workload on this PATH and the repository's examples
#   train.txt          examples/train_ddp.py on one GPU under torchrun: 60 steps with a checkpoint at 40,
#                      then a restart to 80 steps that must resume from step 40's checkpoint
#
# Runs from the repository root; needs nvidia-smi and a python3 with torch. Exit 1 when a step failed.
if [[ "${1:-}" == -h || "${1:-}" == --help || -z "${1:-}" ]]; then
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    [[ -n "${1:-}" ]] && exit 0 || exit 2
fi
set -uo pipefail
out="$1"
mkdir -p "$out"
failed=()
node=scripts/node

{ date -u +%Y-%m-%dT%H:%M:%SZ; uname -r; nvidia-smi --version; python3 --version
  python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'; } >"$out/machine.txt" 2>&1

read -r -a smi_query < <(PYTHONPATH=$node python3 -c 'from health.probe import NVIDIA_SMI_COMMAND as c; print(*c)')
"${smi_query[@]}" >"$out/nvidia-smi.out" 2>&1
echo $? >"$out/nvidia-smi.rc"
nvidia-smi -q -x >"$out/nvidia-smi-q.xml" 2>&1 || failed+=(nvidia-smi-q)

if command -v dcgmi >/dev/null; then
    dcgmi diag -r 1 -j >"$out/dcgm-diag-r1.json" 2>&1 || true
else
    echo "dcgmi is not installed on this machine" >"$out/dcgm.txt"
fi

PYTHONPATH=$node python3 -c '
import importlib, pathlib, sys
names = sorted(p.stem for p in pathlib.Path("scripts/node").glob("*.py"))
names += ["health." + p.stem for p in pathlib.Path("scripts/node/health").glob("*.py") if p.stem != "__init__"]
for name in names:
    importlib.import_module(name)
listed = " ".join(names)
print(f"Python {sys.version.split()[0]}: imported {len(names)} node modules: {listed}")
' >"$out/imports.txt" 2>&1 || failed+=(imports)

python3 $node/selftest.py --instance-type none --workload-path "$PATH" --examples examples \
    >"$out/selftest.txt" 2>&1 || failed+=(selftest)

checkpoints="$(mktemp -d)"
train() {
    CHECKPOINT_DIR="$checkpoints" torchrun --standalone --nnodes 1 --nproc-per-node 1 examples/train_ddp.py \
        --job-id gpu-check --data-dir /nonexistent --checkpoint-every 40 --keep 2 "$@"
}
{ train --steps 60 && echo "--- restart ---" && train --steps 80 && ls "$checkpoints/gpu-check"; } \
    >"$out/train.txt" 2>&1 || failed+=(train)
grep -q 'resumed from step' "$out/train.txt" || failed+=(train-resume)

for f in "$out"/*; do echo "== ${f##*/}"; head -c 1500 "$f"; echo; done
if ((${#failed[@]})); then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "gpu machine check: every step ran"
