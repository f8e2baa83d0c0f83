"""The health check's two ways of acting, followed end to end.

At launch: the real bootstrap.sh against the fake IMDS and the moto-backed endpoint; a node failing
a launch check (the fleet's DCGM level, a DCGM that did not run, a fleet-added Xid, NCCL's OFI
plugin) never reaches InService: the launch hook is abandoned, the reason is in the bootstrap log
and in the GpuNodeUnhealthy metric of its reason class.

In service: the real checkpoint-hook.sh holds its lock while a training job checkpoints; the real
gpu_health.py (in-process, moto) waits for it, and only then marks the instance Unhealthy.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.scripts.node.fake_node import Node, assert_abandoned
from tests.scripts.node.health.support import NAMESPACE, REGION, Fleet, health_of
from tests.scripts.node.helpers import FIXTURES, NODE_DIR, UNIT_DIR, read_unit
from tests.scripts.node.training_job import TrainingJob

# isort: split
import gpu_health
from health.dcgm import DCGM_LEVEL_TIMEOUT_S

HOOK = NODE_DIR / "checkpoint-hook.sh"
HEALTHY_KERNEL = FIXTURES / "p4d_healthy" / "kernel.log"


def replay(node: Node, *, dcgm: Path | None = None, kernel: Path = HEALTHY_KERNEL) -> None:
    """The node's tools as recorded; DCGM replayed (so HEALTH_DCGM decides) or absent."""
    args = node.env["GPU_HEALTH_ARGS"].replace(" --dcgm off", "").replace(str(HEALTHY_KERNEL), str(kernel))
    node.env["GPU_HEALTH_ARGS"] = args + (f" --dcgm-json {dcgm}" if dcgm else "")


def metric_reasons(node: Node) -> bytes:
    return b"".join(raw for _, raw in node.aws.cloudwatch_calls)


def test_a_dcgm_failure_at_the_fleets_level_abandons_the_launch(node: Node, tmp_path: Path) -> None:
    document = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {"gpu_id": "3", "status": "Fail", "warnings": [{"warning": "Memory test failed"}]},
                            ],
                        }
                    ],
                }
            ]
        }
    }
    (tmp_path / "diag.json").write_text(json.dumps(document))
    node.write_node_env(HEALTH_DCGM_LEVEL="2", HEALTH_DCGM="required")
    replay(node, dcgm=tmp_path / "diag.json")
    result = node.run()
    assert_abandoned(node, result, "gpu-health")
    assert "--dcgm-level 2 --dcgm required" in result.log
    assert "unhealthy: DCGM diag level 2: GPU Memory: GPU 3: Memory test failed" in result.log
    sent = metric_reasons(node)
    assert b"GpuNodeUnhealthy" in sent and b"dcgm-gpu-memory" in sent


def test_a_required_dcgm_that_did_not_run_abandons_the_launch(node: Node, tmp_path: Path) -> None:
    (tmp_path / "diag.json").write_text('{"DCGM GPU Diagnostic": {"runtime_error": "Unable to create the GPU group"}}')
    node.write_node_env(HEALTH_DCGM="required")
    replay(node, dcgm=tmp_path / "diag.json")
    result = node.run()
    assert_abandoned(node, result, "gpu-health")
    assert "unhealthy: dcgmi diag did not run: Unable to create the GPU group" in result.log
    assert b"dcgm-not-run" in metric_reasons(node)


def test_the_same_dcgm_not_running_is_only_a_warning_when_not_required(node: Node, tmp_path: Path) -> None:
    (tmp_path / "diag.json").write_text('{"DCGM GPU Diagnostic": {"runtime_error": "Unable to create the GPU group"}}')
    replay(node, dcgm=tmp_path / "diag.json")
    result = node.run()
    assert result.returncode == 0, result.log
    assert "WARNING dcgmi diag did not run" in result.log
    assert node.fleet.state == "InService"


def test_a_fleet_added_xid_on_a_mig_instance_abandons_the_launch(node: Node, tmp_path: Path) -> None:
    kernel = tmp_path / "kern.log"
    kernel.write_text(
        "2025-03-02T10:00:01+0000 ip-10-0-1-5 kernel: NVRM: Xid (PCI:0000:10:1c GPU-I:05): 63, pid=1896, "
        "Row Remapper: New row marked for remapping, reset gpu to activate.\n"
    )
    replay(node, kernel=kernel)
    node.write_node_env(HEALTH_EXTRA_FATAL_XIDS="63,92")
    result = node.run()
    assert_abandoned(node, result, "gpu-health")
    assert "unhealthy: Xid 63 on GPU 0 (PCI 0000:10:1c, MIG GPU-I 5)" in result.log
    assert b"xid-63" in metric_reasons(node)


def test_without_nccls_ofi_plugin_an_efa_node_is_abandoned(node: Node) -> None:
    for plugin in node.tmp.glob("opt/amazon/ofi-nccl/lib/*"):
        plugin.unlink()
    result = node.run()
    assert_abandoned(node, result, "gpu-health")
    assert "EFA: NCCL's OFI plugin (libnccl-net*.so*) is not installed" in result.log
    assert b"efa" in metric_reasons(node)


def test_a_bad_health_value_in_node_env_fails_the_config_step(node: Node) -> None:
    node.write_node_env(HEALTH_DCGM_LEVEL="5")
    result = node.run()
    assert_abandoned(node, result, "config")
    assert "HEALTH_DCGM_LEVEL must match ^[1-4]$, got '5'" in result.log


# ---------------------------------------------------------------------------------------------
# In service: Unhealthy after the checkpoint in progress, never during it
# ---------------------------------------------------------------------------------------------


def in_service_check(fleet: Fleet, lock: Path, wait_s: float) -> int:
    return gpu_health.main(
        [
            "--once", "--dcgm", "off", "--fabric-manager", "off", "--efa-devices", "0",
            "--expected-gpus", "8", "--namespace", NAMESPACE, "--region", REGION,
            "--asg-name", fleet.asg_name, "--instance-id", fleet.instance_id,
            "--nvidia-smi-output", str(FIXTURES / "p4d_xid79" / "nvidia-smi.out"), "--nvidia-smi-rc", "15",
            "--kernel-log-file", str(FIXTURES / "p4d_xid79" / "kernel.log"),
            "--checkpoint-lock", str(lock), "--checkpoint-wait", str(wait_s),
        ]
    )  # fmt: skip


@pytest.fixture
def contract(tmp_path: Path) -> dict[str, Path]:
    state = tmp_path / "run" / "gpu-platform"
    (state / "jobs").mkdir(parents=True)
    (tmp_path / "fsx" / "checkpoints").mkdir(parents=True)
    return {"state": state, "jobs": state / "jobs", "checkpoints": tmp_path / "fsx" / "checkpoints"}


def start_hook(contract: dict[str, Path]) -> subprocess.Popen[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "CHECKPOINT_STATE_DIR": str(contract["state"]),
        "TRAINING_PID_DIR": str(contract["jobs"]),
        "CHECKPOINT_DIR": str(contract["checkpoints"]),
        "CHECKPOINT_TIMEOUT": "20",
        "CHECKPOINT_POLL": "0.05",
        "NOTICE_KIND": "rebalance",
        "NOTICE_ACTION": "rebalance",
    }
    hook = subprocess.Popen(["bash", str(HOOK)], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while not (contract["state"] / "checkpoint.lock").exists():
        assert time.monotonic() < deadline, "the checkpoint hook did not take its lock"
        time.sleep(0.01)
    return hook


def test_in_service_unhealthy_waits_for_the_checkpoint_in_progress(contract: dict[str, Path], fleet: Fleet) -> None:
    with TrainingJob(contract["jobs"], contract["checkpoints"], delay=2.0) as job:
        hook = start_hook(contract)
        marked_at: list[float] = []
        done = threading.Event()

        def check() -> None:
            in_service_check(fleet, contract["state"] / "checkpoint.lock", wait_s=30)
            marked_at.append(time.monotonic())
            done.set()

        threading.Thread(target=check, daemon=True).start()
        time.sleep(1.0)
        assert health_of(fleet.instance_id) == "HEALTHY"  # the checkpoint is still being written
        assert hook.wait(timeout=30) == 0, hook.stdout.read() if hook.stdout else ""
        hook_done = time.monotonic()
        assert job.checkpoint_files(), "the job wrote no checkpoint"
        assert done.wait(timeout=30)
    assert marked_at[0] >= hook_done - 0.5
    assert health_of(fleet.instance_id) == "UNHEALTHY"


@pytest.mark.slow
def test_a_checkpoint_that_outlasts_the_wait_defers_the_mark(contract: dict[str, Path], fleet: Fleet) -> None:
    with TrainingJob(contract["jobs"], contract["checkpoints"], delay=4.0):
        hook = start_hook(contract)
        assert in_service_check(fleet, contract["state"] / "checkpoint.lock", wait_s=0.5) == 1
        assert health_of(fleet.instance_id) == "HEALTHY"  # deferred to the next timer run
        hook.wait(timeout=30)
    assert in_service_check(fleet, contract["state"] / "checkpoint.lock", wait_s=0.5) == 1
    assert health_of(fleet.instance_id) == "UNHEALTHY"


def test_the_unit_outlasts_dcgm_level_1_and_the_checkpoint_wait() -> None:
    service = read_unit(UNIT_DIR / "gpu-health.service")["Service"]
    (timeout,) = service["TimeoutStartSec"]
    wait = gpu_health.build_parser().parse_args(["--expected-gpus", "1"]).checkpoint_wait
    assert int(timeout) >= DCGM_LEVEL_TIMEOUT_S[1] + wait + 30
    # the lock's directory is neither hidden nor made private to the unit
    assert not any(
        "/run" in value for key in ("InaccessiblePaths", "TemporaryFileSystem") for value in service.get(key, [])
    )
