"""The node scripts against the real Slurm: the health prolog and the health timer drain a node on a recorded bad
output (../shared/reference/gpu-outputs, real GPU servers), and a Spot interruption notice (fake IMDS) leads to a
checkpoint through the contract (pid file, SIGUSR1), a requeue, and a resume from that checkpoint on the other
node."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.flows.slurm import jobs
from tests.flows.slurm.cluster import SlurmCluster
from tests.reference import reference_path
from tests.scripts.node.helpers import NODE_DIR, FakeImds

# isort: split
from spot_watcher import NOTICE_PATHS

pytestmark = pytest.mark.slow  # a real Slurm: seconds per job (make test-fast leaves them out)
BAD = "xid48-63-94-dbe-h100-dmesg-iso"  # Xid 48, a double-bit ECC error: unhealthy
HEALTHY = "h100x8-535.161-q-healthy"
SPOT_NOTICE = '{"action": "terminate", "time": "2026-11-26T20:00:00Z"}'


def replay_args(case: str) -> list[str]:
    folder = reference_path("gpu-outputs", case)
    args = ["--nvidia-smi-output", str(folder / "smi.txt"), "--fabric-manager", "off"]
    return args + (["--kernel-log-file", str(folder / "kern.log")] if (folder / "kern.log").exists() else [])


def give_node(slurm: SlurmCluster, node: str, case: str) -> None:
    """What the node's prolog replays (config.prolog_sh): the recorded case, an 8-GPU node.env."""
    folder = slurm.path("health", node)
    folder.mkdir(exist_ok=True)
    (folder / "node.env").write_text("EXPECTED_GPUS=8\n")
    (folder / "args").write_text("\n".join(replay_args(case)) + "\n")


def wait_drained(slurm: SlurmCluster, node: str, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while "DRAIN" not in (state := slurm.node(node))["State"]:
        assert time.monotonic() < deadline, f"node {node} is {state['State']}, not drained"
        time.sleep(0.2)
    return state["Reason"]


def test_the_health_prolog_drains_a_node_with_the_reason_and_the_job_is_requeued(clean_slurm: SlurmCluster) -> None:
    slurm = clean_slurm
    give_node(slurm, "a", HEALTHY)
    give_node(slurm, "b", BAD)
    fine = slurm.sbatch("--nodelist=a", "--output=/dev/null", "--wrap=true")
    assert slurm.wait_job(fine, {"COMPLETED", "FAILED"}) == "COMPLETED"
    assert slurm.job_field(fine, "NodeList") == "a" and "DRAIN" not in slurm.node("a")["State"]

    job = slurm.sbatch("--nodelist=b", "--output=/dev/null", "--wrap=true")
    reason = wait_drained(slurm, "b")
    assert reason.startswith("gpu-health xid-48: Xid 48 on GPU 0 (PCI 0000:19:00): Double Bit ECC Error"), reason
    log = slurm.path("health", "b", "prolog.log").read_text()
    assert "drained Slurm node b" in log and "unhealthy: Xid 48" in log, log
    slurm.wait_job(job, {"PENDING"})
    assert int(slurm.job_field(job, "Restarts")) == 1 and slurm.job_field(job, "Reason") != "JobHeldAdmin"


def test_the_health_timer_drains_the_node_and_requeues_its_job_onto_the_other(clean_slurm: SlurmCluster) -> None:
    slurm = clean_slurm
    job = slurm.sbatch("--requeue", "--output=/dev/null", "--wrap=sleep 300")
    slurm.wait_job(job, {"RUNNING"})
    node = slurm.job_field(job, "NodeList")
    other = "b" if node == "a" else "a"
    check = [sys.executable, str(NODE_DIR / "gpu_health.py"), "--once", "--expected-gpus", "8", "--no-metric"]
    check += ["--no-set-health", "--no-unit-check", "--dcgm", "off", "--slurm-node", node, *replay_args(BAD)]
    done = subprocess.run(check, env=slurm.env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"requeued Slurm jobs on {node}: {job}" in done.stdout, done.stdout
    assert wait_drained(slurm, node).startswith("gpu-health xid-48: Xid 48 on GPU 0")
    slurm.wait_job(job, {"RUNNING"}, timeout_s=60)
    assert slurm.job_field(job, "NodeList") == other and slurm.job_field(job, "Restarts") == "1"


def wait_for_text(path: Path, pattern: str, timeout_s: float = 90.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout_s
    while not (match := re.search(pattern, path.read_text() if path.exists() else "")):
        text = path.read_text() if path.exists() else "(no file)"
        tail = "\n".join(line for line in text.splitlines() if not line.startswith("step "))[-3000:]
        assert time.monotonic() < deadline, f"no {pattern!r} in {path} after {timeout_s:g} s: {tail}"
        time.sleep(0.2)
    return match


def test_a_spot_notice_checkpoints_requeues_and_the_job_resumes_from_that_checkpoint(
    clean_slurm: SlurmCluster,
) -> None:
    slurm = clean_slurm
    job = jobs.submit(slurm, "--nodes=1", "--account=nlp", train=("--steps", "1000000", "--checkpoint-every", "0"))
    out = slurm.path("jobs", f"train-ddp-{job}.out")
    wait_for_text(out, r"fresh start")
    node = slurm.job_field(job, "NodeList")
    state_dir = slurm.path(f"checkpoint-state-{node}")
    state_dir.mkdir()
    env = {**slurm.env, **jobs.training_env(slurm), "CHECKPOINT_STATE_DIR": str(state_dir), "CHECKPOINT_POLL": "0.2"}
    with FakeImds() as imds:
        imds.set(NOTICE_PATHS["interruption"], SPOT_NOTICE)
        watcher = [sys.executable, str(NODE_DIR / "spot_watcher.py"), "--imds-url", imds.url, "--interval", "0.2"]
        watcher += ["--hook", str(NODE_DIR / "checkpoint-hook.sh"), "--slurm-node", node, "--max-polls", "5"]
        done = subprocess.run(watcher, env=env, capture_output=True, text=True, timeout=120, check=False)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    signalled = re.search(rf"job train-ddp-{job}: new checkpoint file: \S+/step-(\d+)\.pt", said)
    assert signalled and f"Slurm node {node} drained; requeued: {job}" in said, said
    assert wait_drained(slurm, node).startswith("Spot interruption notice: action=terminate")

    resumed = wait_for_text(out, rf"job train-ddp-{job}: 1 processes, 2048 samples, resumed from step (\d+)")
    assert int(resumed[1]) >= int(signalled[1])  # that checkpoint, or the one its SIGTERM wrote after it
    assert f"step-{int(resumed[1]):09d}.pt" == jobs.checkpoints(slurm, job)[-1]
    restarted = wait_for_text(out, rf"job train-ddp-{job}: 1 node\(s\) (\w+), restart 1")
    assert restarted[1] != node
