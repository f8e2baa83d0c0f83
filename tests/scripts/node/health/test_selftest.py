"""selftest.py: every probe of a node, each with its verdict, driven here by the tools' recorded outputs.

nvidia-smi, the kernel log and dcgmi are stand-ins that print the fixtures (tests/scripts/node/fixtures); the
workload Python is this interpreter with a torch that has no CUDA. On a real GPU node or the GPU machine
the same command runs the real tools (docs/testing.md: "On a real GPU").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts.node.helpers import FIXTURES, NODE_DIR

SELFTEST = NODE_DIR / "selftest.py"
EXAMPLES = NODE_DIR.parents[1] / "examples"
NO_CUDA_TORCH = (
    '__version__ = "2.14.1+cpu"\n\n\nclass version:\n    cuda = None\n\n\nclass cuda:\n'
    "    @staticmethod\n    def is_available():\n        return False\n"
)


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(0o755)


def _node(tmp_path: Path, case: str, dcgm: str | None) -> tuple[Path, str]:
    """A PATH with nvidia-smi, journalctl (and dcgmi) replaying a fixture; a workload PATH whose python3
    imports a torch without CUDA."""
    bin_dir, workload, stub = tmp_path / "bin", tmp_path / "workload", tmp_path / "stub"
    for folder in (bin_dir, workload, stub / "torch"):
        folder.mkdir(parents=True)
    fixture = FIXTURES / case
    rc = (fixture / "nvidia-smi.rc").read_text().strip()
    _tool(bin_dir, "nvidia-smi", f'cat "{fixture}/nvidia-smi.out"; exit {rc}')
    _tool(bin_dir, "journalctl", f'cat "{fixture}/kernel.log"')
    if dcgm:
        _tool(bin_dir, "dcgmi", f'cat "{FIXTURES / "dcgm" / dcgm}"')
    (stub / "torch" / "__init__.py").write_text(NO_CUDA_TORCH)
    _tool(workload, "python3", f'PYTHONPATH="{stub}" exec "{sys.executable}" "$@"')
    return bin_dir, f"{workload}:/usr/bin:/bin"


def _run(bin_dir: Path, workload: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(NODE_DIR)}
    argv = [sys.executable, str(SELFTEST), "--instance-type", "none", "--workload-path", workload]
    argv += ["--examples", str(EXAMPLES), "--service-timeout", "20", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def _verdicts(out: str) -> dict[str, str]:
    return {line[5:15].strip(): line[:4] for line in out.splitlines() if line[:4] in ("PASS", "FAIL", "SKIP")}


def test_a_healthy_node_passes_gpu_and_dcgm_and_says_why_it_skips(tmp_path: Path) -> None:
    bin_dir, workload = _node(tmp_path, "p4d_healthy", "diag-r1-pass.json")
    done = _run(bin_dir, workload, "--expected-gpus", "8", "--skip", "torch", "--skip", "service")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _verdicts(done.stdout) == {
        "gpu": "PASS",
        "dcgm": "PASS",
        "fabric": "SKIP",
        "efa": "SKIP",
        "ofi-nccl": "SKIP",
        "torch": "SKIP",
        "service": "SKIP",
        "image": "SKIP",
    }
    assert "PASS gpu       8 GPU(s) (NVIDIA A100-SXM4-40GB), 8 expected" in done.stdout
    assert "SKIP efa       no EFA interface expected (--efa-devices 0)" in done.stdout
    assert done.stdout.rstrip().endswith("selftest: ok (2 passed, the rest skipped)")


@pytest.mark.parametrize(
    ("case", "dcgm", "failed", "needle"),
    [
        ("p4d_xid79", "diag-r1-pass.json", "gpu", "Xid 79"),
        ("p4d_healthy", "diag-r1-v4-fail.json", "dcgm", "dcgmi diag -r 1:"),
    ],
)
def test_a_bad_recorded_output_fails_its_probe_and_the_command(
    tmp_path: Path, case: str, dcgm: str, failed: str, needle: str
) -> None:
    bin_dir, workload = _node(tmp_path, case, dcgm)
    done = _run(bin_dir, workload, "--expected-gpus", "8", "--skip", "torch", "--skip", "service")
    assert done.returncode == 1
    line = next(line for line in done.stdout.splitlines() if line.startswith(f"FAIL {failed}"))
    assert needle in line
    assert f"selftest: FAILED {failed}" in done.stdout


def test_without_dcgm_without_cuda_and_without_a_serving_model(tmp_path: Path) -> None:
    bin_dir, workload = _node(tmp_path, "p4d_healthy", None)
    done = _run(bin_dir, workload, "--efa-devices", "0")
    verdicts = _verdicts(done.stdout)
    assert (verdicts["gpu"], verdicts["dcgm"], verdicts["torch"], verdicts["service"]) == (
        "PASS",
        "SKIP",
        "FAIL",
        "FAIL",
    )
    assert "torch.cuda.is_available() is False" in done.stdout
    assert "FAIL service   serve.py exited" in done.stdout
    assert done.returncode == 1


def test_an_efa_fleet_without_the_plugin_fails_ofi_nccl(tmp_path: Path) -> None:
    bin_dir, workload = _node(tmp_path, "p4d_healthy", None)
    done = _run(bin_dir, workload, "--efa-devices", "4", "--skip", "torch", "--skip", "service")
    verdicts = _verdicts(done.stdout)
    assert (verdicts["efa"], verdicts["ofi-nccl"]) == ("FAIL", "FAIL")
    assert done.returncode == 1


RECORDED = FIXTURES / "h100x1_recorded"


def test_the_health_check_judges_the_recorded_h100_healthy() -> None:
    env = {**os.environ, "PYTHONPATH": str(NODE_DIR)}
    argv = [sys.executable, str(NODE_DIR / "gpu_health.py"), "--once", "--expected-gpus", "1", "--no-metric"]
    argv += ["--no-set-health", "--dcgm", "off", "--fabric-manager", "off"]
    argv += ["--nvidia-smi-output", str(RECORDED / "nvidia-smi.out"), "--kernel-log-file", os.devnull]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    argv[argv.index("--expected-gpus") + 1] = "2"  # the same machine judged against a two-GPU type
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "GPU count is 1, expected 2" in done.stdout, done.stdout + done.stderr


def test_the_recorded_outputs_agree_with_each_other() -> None:
    machine = (RECORDED / "machine.txt").read_text()
    xml = (RECORDED / "nvidia-smi-q.xml").read_text()
    driver = re.search(r"DRIVER version\s*: (\S+)", machine)
    assert driver and f"<driver_version>{driver.group(1)}</driver_version>" in xml
    assert "NVIDIA H100 80GB HBM3" in (RECORDED / "nvidia-smi.out").read_text()
    assert "selftest: ok" in (RECORDED / "selftest.txt").read_text()
    assert "Python 3.12" in (RECORDED / "imports.txt").read_text()  # layout.NODE_PYTHON_VERSION's
    train = (RECORDED / "train.txt").read_text()
    assert "resumed from step 40" in train and "done at step 80" in train


def test_the_image_probe_reads_what_the_golden_ami_records(tmp_path: Path) -> None:
    bin_dir, workload = _node(tmp_path, "p4d_healthy", None)
    recorded = tmp_path / "image-versions.json"
    recorded.write_text('{"NvidiaDriverVersion": "595.91.07", "DcgmVersion": "4.7.0"}')
    skip = ["--skip", "torch", "--skip", "service"]
    done = _run(bin_dir, workload, "--image-versions", str(recorded), *skip)
    assert "PASS image     golden AMI: DcgmVersion 4.7.0, NvidiaDriverVersion 595.91.07" in done.stdout
    done = _run(bin_dir, workload, "--image-versions", str(tmp_path / "absent.json"), *skip)
    assert "SKIP image     no " in done.stdout and "not a golden AMI" in done.stdout
    recorded.write_text("{not json")
    done = _run(bin_dir, workload, "--image-versions", str(recorded), *skip)
    assert _verdicts(done.stdout)["image"] == "FAIL" and done.returncode == 1
