"""A node being bootstrapped, faked around the real bootstrap.sh: a fake IMDS, fake system binaries (fi_info, the
CloudWatch agent's ctl, nvidia-modprobe, tests/scripts/node/fake_disks.py and fake_units.py), the real gpu_health.py
replaying recorded nvidia-smi output, and a moto-backed Auto Scaling endpoint for the launch lifecycle hook
(tests/scripts/node/fake_aws.py). The fixtures that make one per test are in tests/scripts/node/conftest.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.scripts.node.fake_aws import FakeAws, LifecycleFleet
from tests.scripts.node.fake_disks import FakeDisks
from tests.scripts.node.fake_units import FakeUnits, stop_units
from tests.scripts.node.helpers import FIXTURES, NODE_DIR, FakeImds

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import layout

BOOTSTRAP = NODE_DIR / "bootstrap.sh"
STEPS = [
    "config",
    "identity",
    "instance-type",
    "cloudwatch-agent",
    "units",
    "scratch",
    "efa",
    "gpu-health",
    "lustre",
    "containers",
    "services",
    "service",
]
INSTANCE_TYPES = {
    "p4d.24xlarge": {"gpus": 8, "efa_interfaces": 4, "gpudirect_rdma": True},
    "g4dn.12xlarge": {"gpus": 4, "efa_interfaces": 1, "gpudirect_rdma": False},
}

# Record every call (name and arguments) in $FAKE_CALLS; behaviour from FAKE_* variables. systemctl and
# journalctl are tests/scripts/node/fake_units.py's.
FAKE_FI_INFO = """#!/usr/bin/env bash
printf 'fi_info %s\\n' "$*" >>"$FAKE_CALLS"
devices="${FAKE_EFA_DEVICES:-0}"
if ((devices == 0)); then
  echo "fi_getinfo: -61 (No data available)" >&2
  exit 1
fi
for ((i = 0; i < devices; i++)); do
  for kind in rdm dgrm; do
    printf 'provider: efa\\n    fabric: efa\\n    domain: rdmap%ds27-%s\\n    version: 122.0\\n' "$((16 + i))" "$kind"
    printf '    type: FI_EP_%s\\n    protocol: FI_PROTO_EFA\\n' "${kind^^}"
  done
done
"""
FAKE_AGENT_CTL = """#!/usr/bin/env bash
printf 'amazon-cloudwatch-agent-ctl %s\\n' "$*" >>"$FAKE_CALLS"
echo "Successfully fetched the config and saved in /opt/aws/amazon-cloudwatch-agent/etc/amazon-cloudwatch-agent.d"
"""
# As root, nvidia-modprobe -u loads nvidia-uvm and creates its device files; it says nothing when it cannot.
FAKE_NVIDIA_MODPROBE = """#!/usr/bin/env bash
printf 'nvidia-modprobe %s\\n' "$*" >>"$FAKE_CALLS"
[[ -z "${FAKE_NVIDIA_MODPROBE_FAIL:-}" ]] || exit 1
"""


@dataclass
class Result:
    returncode: int
    stderr: str
    log: str
    calls: list[str]

    def steps(self, status: str) -> list[str]:
        return re.findall(rf"^\S+ bootstrap: step (\S+): {status}\b", self.log, flags=re.M)


@dataclass
class Node:
    """One instance being bootstrapped: its files under tmp_path, its IMDS, its AWS endpoint."""

    tmp: Path
    imds: FakeImds
    aws: FakeAws
    env: dict[str, str]
    disks: FakeDisks
    units: FakeUnits

    @property
    def fleet(self) -> LifecycleFleet:
        return self.aws.fleet

    @property
    def etc(self) -> Path:
        return self.tmp / "etc"

    def path(self, name: str) -> Path:
        return Path(self.env[name])

    def write_node_env(self, **overrides: str | None) -> None:
        values: dict[str, str | None] = {
            "GPU_PLATFORM_ENV": "test",
            "AWS_REGION": self.fleet.region,
            "FLEET_NAME": "p4d",
            "ASG_NAME": self.fleet.asg_name,
            "LAUNCH_HOOK_NAME": self.fleet.launch_hook,
            "TERMINATE_HOOK_NAME": self.fleet.terminate_hook,
            "METRIC_NAMESPACE": "GpuPlatform/Test",
            "FSX_DNS_NAME": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            "FSX_MOUNT_NAME": "abcdefgh",
            "FSX_MOUNT_POINT": "/fsx",
            "CHECKPOINT_DIR": "/fsx/checkpoints",
            "EFA_ENABLED": "true",
            "CONTAINERS_ENABLED": "false",
            **overrides,
        }
        text = "".join(f"{key}={value}\n" for key, value in values.items() if value is not None)
        self.path("NODE_ENV_FILE").write_text(text)

    def boot_as(self, instance_type: str, *, smi: str | Path, efa_devices: int) -> None:
        self.imds.set("/latest/meta-data/instance-type", instance_type)
        smi_file = smi if isinstance(smi, Path) else self.tmp / "nvidia-smi.out"
        if not isinstance(smi, Path):
            smi_file.write_text(smi)
        plugin_dir = self.tmp / "opt" / "amazon" / "ofi-nccl" / "lib"  # NCCL's OFI plugin, as the EFA installer puts it
        plugin_dir.mkdir(parents=True, exist_ok=True)
        (plugin_dir / "libnccl-net.so").write_text("")
        self.env["GPU_HEALTH_ARGS"] = (
            f"--nvidia-smi-output {smi_file} --kernel-log-file {FIXTURES / 'p4d_healthy' / 'kernel.log'} --dcgm off "
            f"--ofi-nccl-dir {plugin_dir} --checkpoint-lock {self.tmp / 'no-checkpoint.lock'}"
        )
        self.env["FAKE_EFA_DEVICES"] = str(efa_devices)

    def run(self, script: Path = BOOTSTRAP) -> Result:
        # exec keeps the pid, so a fake can signal the bootstrap itself.
        command = ["bash", "-c", 'export FAKE_BOOTSTRAP_PID=$$; exec bash "$0"', str(script)]
        completed = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60, check=False)
        log_file = self.path("BOOTSTRAP_LOG")
        calls_file = Path(self.env["FAKE_CALLS"])
        return Result(
            returncode=completed.returncode,
            stderr=completed.stderr,
            log=log_file.read_text() if log_file.exists() else "",
            calls=calls_file.read_text().splitlines() if calls_file.exists() else [],
        )


def install_fakes(bin_dir: Path) -> dict[str, str]:
    bin_dir.mkdir()
    paths = {}
    for name, text in (
        ("fi_info", FAKE_FI_INFO),
        ("amazon-cloudwatch-agent-ctl", FAKE_AGENT_CTL),
        ("nvidia-modprobe", FAKE_NVIDIA_MODPROBE),
    ):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
        paths[name] = str(path)
    return paths


def new_node(tmp_path: Path, aws: FakeAws, imds: FakeImds) -> Node:
    """A p4d node that passes every step, its files under ``tmp_path``, answering ``imds`` and ``aws``."""
    fleet = aws.fleet
    imds.set("/latest/meta-data/instance-id", fleet.instance_id)
    imds.set("/latest/meta-data/placement/region", fleet.region)
    etc = tmp_path / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "instance-types.json").write_text(json.dumps(INSTANCE_TYPES))
    (etc / "cloudwatch-agent.json").write_text('{"agent": {"run_as_user": "cwagent"}}')
    fakes = install_fakes(tmp_path / "bin")
    disks = FakeDisks(tmp_path)  # the root disk only: no scratch device unless a test adds one
    units = FakeUnits(tmp_path)  # every unit stays up; gpu-service.service runs the real launcher (below)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FAKE_"))},
        **aws.client_env(),
        "NODE_ENV_FILE": str(etc / "node.env"),
        "INSTANCE_TYPES_FILE": str(etc / "instance-types.json"),
        "CLOUDWATCH_AGENT_CONFIG": str(etc / "cloudwatch-agent.json"),
        "EFA_NODE_ENV_FILE": str(etc / "efa-node.env"),
        "PROFILE_SCRIPT": str(tmp_path / "profile.d" / "gpu-platform-nccl.sh"),
        "BOOTSTRAP_LOG": str(tmp_path / "log" / "gpu-platform" / "bootstrap.log"),
        "SYSTEMD_UNIT_DIR": str(tmp_path / "systemd-system"),
        "IMDS_URL": imds.url,
        "PYTHON_BIN": sys.executable,
        "FI_INFO_BIN": fakes["fi_info"],
        "CLOUDWATCH_AGENT_CTL": fakes["amazon-cloudwatch-agent-ctl"],
        "LOG_FLUSH_WAIT_S": "0",
        "FAKE_CALLS": str(tmp_path / "calls.log"),
        "SERVICE_FILE": str(etc / "service.json"),
        "SERVICE_WAIT_INTERVAL_S": "0.2",
        "UNIT_SETTLE_S": "0.05",
        "IMAGE_VERSIONS_FILE": str(tmp_path / "opt" / "gpu-platform" / "image-versions.json"),  # none: not golden
        **disks.install(tmp_path / "bin"),
        **units.install(tmp_path / "bin"),
    }
    # gpu-service.service as its unit file has it: the launcher's prepare as root (ExecStartPre=+), then run;
    # systemd gives up after 5 starts (StartLimitBurst), i.e. 4 restarts.
    launcher = f"env PYTHONPATH={shlex.quote(str(NODE_DIR))} {shlex.quote(sys.executable)} -m serving.launch"
    config = '--config "$SERVICE_FILE"'
    units.runs(
        layout.GPU_SERVICE_UNIT,
        f"exec {launcher} run {config}",
        pre=f"{launcher} prepare {config} --nvidia-modprobe {shlex.quote(fakes['nvidia-modprobe'])}",
        restarts=4,
    )
    booted = Node(tmp=tmp_path, imds=imds, aws=aws, env=env, disks=disks, units=units)
    booted.write_node_env()
    booted.boot_as("p4d.24xlarge", smi=FIXTURES / "p4d_healthy" / "nvidia-smi.out", efa_devices=4)
    return booted


def stop_service(tmp_path: Path) -> None:
    """Ends the processes the fake systemctl started for the units of the node under ``tmp_path``."""
    stop_units(tmp_path / "units")


def lifecycle_call(node: Node, result: str) -> dict[str, str]:
    return {
        "Action": "CompleteLifecycleAction",
        "Version": "2011-01-01",
        "LifecycleHookName": node.fleet.launch_hook,
        "AutoScalingGroupName": node.fleet.asg_name,
        "InstanceId": node.fleet.instance_id,
        "LifecycleActionResult": result,
    }


def assert_abandoned(node: Node, result: Result, step: str) -> None:
    assert result.returncode == 1, result.stderr
    assert node.aws.calls == [lifecycle_call(node, "ABANDON")]
    assert node.fleet.state == "Terminating"
    assert result.steps("FAILED") == [step]
    assert f"bootstrap FAILED at step {step} " in result.log
    assert "launch lifecycle hook completed with ABANDON" in result.log
    done = STEPS.index(step)
    assert result.steps("ok") == STEPS[:done]
    assert result.steps("start") == STEPS[: done + 1]
