"""bootstrap.sh end to end: a fake IMDS, fake system binaries, the real gpu_health.py replaying
recorded nvidia-smi output, and a moto-backed Auto Scaling endpoint for the launch lifecycle hook."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from moto import mock_aws

from tests.node.fake_aws import FakeAws, LifecycleFleet
from tests.node.fake_disks import FakeDisks
from tests.node.fake_units import FakeUnits, stop_units
from tests.node.helpers import FIXTURES, NODE_DIR, FakeImds

# isort: split
# Importable once tests.node.helpers has put scripts/node on sys.path.
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
T4_SMI = "".join(
    f"{i}, Tesla T4, 00000000:00:{0x1B + i:02X}.0, Enabled, 0, 30\n" for i in range(4)
)  # g4dn.12xlarge: 4 x T4

# Record every call (name and arguments) in $FAKE_CALLS; behaviour from FAKE_* variables. systemctl and
# journalctl are tests/node/fake_units.py's.
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


@pytest.fixture(scope="module")
def shared_aws() -> Iterator[FakeAws]:
    """One moto group and one endpoint for the module (moto set-up is the slow part); reset per test."""
    with mock_aws(), FakeAws(LifecycleFleet()) as aws:
        yield aws


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


@pytest.fixture
def node(tmp_path: Path, shared_aws: FakeAws) -> Iterator[Node]:
    shared_aws.reset()
    with FakeImds() as imds:
        yield new_node(tmp_path, shared_aws, imds)
    stop_service(tmp_path)


@dataclass
class Booted:
    """One bootstrap of the default node (a p4d that passes every step), read by several tests: the node's files,
    the run's result, and what the endpoint and the group saw by the end of it."""

    node: Node
    result: Result
    aws_calls: list[dict[str, str]]
    cloudwatch_calls: list[tuple[str, bytes]]
    fleet_state: str


@pytest.fixture(scope="module")
def booted(tmp_path_factory: pytest.TempPathFactory, shared_aws: FakeAws) -> Iterator[Booted]:
    """The default node bootstrapped once for the module (each run costs about 1.3 s of CPU: five Python starts)."""
    tmp = tmp_path_factory.mktemp("booted")
    shared_aws.reset()
    with FakeImds() as imds:
        node = new_node(tmp, shared_aws, imds)
        result = node.run()
    yield Booted(node, result, list(shared_aws.calls), list(shared_aws.cloudwatch_calls), shared_aws.fleet.state)
    stop_service(tmp)


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


# ---------------------------------------------------------------------------------------------
# success
# ---------------------------------------------------------------------------------------------


def test_every_step_runs_in_order_then_the_launch_hook_continues(booted: Booted) -> None:
    node, result = booted.node, booted.result

    assert result.returncode == 0, result.stderr
    assert result.steps("start") == STEPS
    assert result.steps("ok") == STEPS
    agent_config = node.path("CLOUDWATCH_AGENT_CONFIG")
    show = "systemctl show --property=ActiveState,SubState,Result,NRestarts"
    assert result.calls == [
        f"amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s -c file:{agent_config}",
        "systemctl daemon-reload",
        "systemctl enable --now lifecycle-watcher.service",
        *[f"{show} lifecycle-watcher.service"] * 2,  # up at once, and still up after the settle time
        "fi_info -p efa",
        "systemctl enable lustre-mount.service",
        "systemctl start lustre-mount.service",
        "systemctl enable --now gpu-health.timer",
        "systemctl enable --now spot-watcher.service",
        *[f"{show} gpu-health.timer", f"{show} spot-watcher.service"] * 2,
    ]
    assert booted.aws_calls == [lifecycle_call(node, "CONTINUE")]  # last, and only once everything passed
    assert booted.fleet_state == "InService"
    assert "launch lifecycle hook completed with CONTINUE" in result.log
    # The boot-time GPU check published its metric to the fleet's namespace (not the default one).
    ((operation, body),) = booted.cloudwatch_calls
    assert operation == "PutMetricData"
    assert b"GpuPlatform/Test" in body and node.fleet.asg_name.encode() in body


def test_run_through_the_per_boot_link_finds_its_steps_and_scripts(node: Node) -> None:
    # cloud-init runs the bootstrap at a later boot through a link in its per-boot folder (warm pool).
    per_boot = node.tmp / "per-boot"
    per_boot.mkdir()
    link = per_boot / "gpu-platform-bootstrap.sh"
    link.symlink_to(BOOTSTRAP)
    result = node.run(link)

    assert result.returncode == 0, result.stderr
    assert result.steps("ok") == STEPS
    assert f"scripts in {NODE_DIR}" in result.log
    assert node.aws.calls == [lifecycle_call(node, "CONTINUE")]


def test_expected_gpus_is_added_to_node_env_once(node: Node) -> None:
    assert node.run().returncode == 0
    lines = node.path("NODE_ENV_FILE").read_text().splitlines()
    assert lines[-2:] == ["EXPECTED_GPUS=8", "EXPECTED_EFA=4"]
    assert lines[0] == "GPU_PLATFORM_ENV=test"

    node.fleet.states[node.fleet.instance_id] = "Pending:Wait"  # a second run must not add a second line
    assert node.run().returncode == 0
    text = node.path("NODE_ENV_FILE").read_text()
    assert text.count("EXPECTED_GPUS=") == 1 and text.count("EXPECTED_EFA=") == 1


def test_units_are_installed_and_the_log_is_world_readable(booted: Booted) -> None:
    node = booted.node
    assert booted.result.returncode == 0, booted.result.stderr
    installed = sorted(path.name for path in node.path("SYSTEMD_UNIT_DIR").iterdir())
    assert installed == sorted(layout.UNITS)
    for path in node.path("SYSTEMD_UNIT_DIR").iterdir():
        assert path.stat().st_mode & 0o777 == 0o644
    log_file = node.path("BOOTSTRAP_LOG")
    assert log_file.stat().st_mode & 0o777 == 0o644
    assert log_file.parent.stat().st_mode & 0o777 == 0o755


def test_containers_enabled_starts_the_container_runtime(node: Node) -> None:
    node.write_node_env(CONTAINERS_ENABLED="true")
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert "systemctl enable --now docker.service" in result.calls
    assert result.calls.index("systemctl enable --now docker.service") < result.calls.index(
        "systemctl enable --now gpu-health.timer"
    )


# ---------------------------------------------------------------------------------------------
# EFA environment
# ---------------------------------------------------------------------------------------------


def test_p4d_gets_gpudirect_rdma_in_its_efa_environment(booted: Booted) -> None:
    node = booted.node
    assert booted.result.returncode == 0, booted.result.stderr
    profile = node.path("PROFILE_SCRIPT").read_text()
    exports = [line for line in profile.splitlines() if not line.startswith("#")]
    assert exports == ["export FI_PROVIDER=efa", "export FI_EFA_USE_DEVICE_RDMA=1", "export NCCL_DEBUG=WARN"]
    assert node.path("PROFILE_SCRIPT").stat().st_mode & 0o777 == 0o644
    efa_env = node.path("EFA_NODE_ENV_FILE").read_text().splitlines()
    assert [line for line in efa_env if not line.startswith("#")] == [
        "FI_PROVIDER=efa",
        "FI_EFA_USE_DEVICE_RDMA=1",
        "NCCL_DEBUG=WARN",
    ]
    # The profile script is valid sh and exports what it says.
    shown = subprocess.run(
        ["sh", "-c", f'. "{node.path("PROFILE_SCRIPT")}"; env'], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert {"FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1", "NCCL_DEBUG=WARN"} <= set(shown)


def test_g4dn_12xlarge_gets_no_device_rdma(node: Node) -> None:
    node.boot_as("g4dn.12xlarge", smi=T4_SMI, efa_devices=1)
    result = node.run()

    assert result.returncode == 0, result.stderr
    exports = [line for line in node.path("PROFILE_SCRIPT").read_text().splitlines() if not line.startswith("#")]
    assert exports == ["export FI_PROVIDER=efa", "export NCCL_DEBUG=WARN"]
    assert "FI_EFA_USE_DEVICE_RDMA" not in node.path("EFA_NODE_ENV_FILE").read_text()
    assert node.path("NODE_ENV_FILE").read_text().splitlines()[-2:] == ["EXPECTED_GPUS=4", "EXPECTED_EFA=1"]


def test_efa_disabled_writes_no_efa_environment_and_skips_fi_info(node: Node) -> None:
    node.write_node_env(EFA_ENABLED="false")
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert not node.path("PROFILE_SCRIPT").exists()
    assert not any(call.startswith("fi_info") for call in result.calls)
    assert "EFA_ENABLED=false: nothing to do" in result.log
    assert "EXPECTED_EFA=0" in node.path("NODE_ENV_FILE").read_text().splitlines()


def test_fewer_efa_devices_than_the_type_has_abandons(node: Node) -> None:
    node.env["FAKE_EFA_DEVICES"] = "2"
    result = node.run()
    assert_abandoned(node, result, "gpu-health")
    assert "EFA: fi_info -p efa lists 2 EFA devices (rdmap16s27, rdmap17s27), the instance type has 4" in result.log
    assert "EXPECTED_EFA=4" in node.path("NODE_ENV_FILE").read_text().splitlines()


def test_no_efa_provider_abandons(node: Node) -> None:
    node.env["FAKE_EFA_DEVICES"] = "0"
    result = node.run()
    assert_abandoned(node, result, "gpu-health")
    assert "EFA: fi_info -p efa failed (fi_getinfo: -61 (No data available))" in result.log


# ---------------------------------------------------------------------------------------------
# failures: ABANDON, non-zero exit, the log names the step
# ---------------------------------------------------------------------------------------------


def test_gpu_check_failure_abandons(node: Node) -> None:
    node.boot_as("p4d.24xlarge", smi=FIXTURES / "p4d_missing_gpu" / "nvidia-smi.out", efa_devices=4)
    result = node.run()

    assert_abandoned(node, result, "gpu-health")
    assert "bootstrap FAILED at step gpu-health (status 1)" in result.log  # gpu_health.py: 1 = unhealthy
    assert "gpu-health: ERROR unhealthy" in result.log  # gpu_health.py's own reasons are in the log
    assert not any("lustre-mount" in call for call in result.calls)  # nothing after the failed step ran


def test_lustre_mount_failure_abandons(node: Node) -> None:
    node.env["FAKE_SYSTEMCTL_FAIL"] = "start lustre-mount.service"
    result = node.run()

    assert_abandoned(node, result, "lustre")
    assert "Job for lustre-mount.service failed" in result.log
    assert "systemctl status --no-pager --lines=20 lustre-mount.service" in result.calls
    assert "systemctl enable --now spot-watcher.service" not in result.calls


def test_unknown_instance_type_abandons(node: Node) -> None:
    node.imds.set("/latest/meta-data/instance-type", "p3.2xlarge")
    result = node.run()

    assert_abandoned(node, result, "instance-type")
    assert "instance type p3.2xlarge is not listed (it lists: g4dn.12xlarge, p4d.24xlarge)" in result.log
    assert "EXPECTED_GPUS" not in node.path("NODE_ENV_FILE").read_text()
    assert result.calls == []


def test_missing_node_env_key_abandons_with_one_line_per_problem(node: Node) -> None:
    node.write_node_env(FSX_DNS_NAME=None, EFA_ENABLED="yes")
    result = node.run()

    assert_abandoned(node, result, "config")
    assert "node.env: FSX_DNS_NAME is missing or empty" in result.log
    assert "node.env: EFA_ENABLED must be true or false, got 'yes'" in result.log


def test_failed_cloudwatch_agent_abandons(node: Node) -> None:
    node.path("CLOUDWATCH_AGENT_CONFIG").unlink()
    result = node.run()
    assert_abandoned(node, result, "cloudwatch-agent")


def test_without_the_group_name_abandon_cannot_be_sent_and_the_exit_says_so(node: Node) -> None:
    node.write_node_env(ASG_NAME=None)
    result = node.run()

    assert result.returncode == 2
    assert node.aws.calls == []
    assert node.fleet.state == "Pending:Wait"  # the hook's DefaultResult (ABANDON) will apply
    assert "cannot complete the launch lifecycle hook with ABANDON: unknown ASG_NAME" in result.log


def test_continue_that_the_api_refuses_exits_3(node: Node) -> None:
    node.fleet.states[node.fleet.instance_id] = "InService"  # no launch action waiting any more
    result = node.run()

    assert result.returncode == 3
    assert node.aws.calls == [lifecycle_call(node, "CONTINUE")]
    assert "No active Lifecycle Action found" in result.log
    assert "every step succeeded but CONTINUE could not be sent" in result.log


def test_a_signal_in_the_middle_of_a_step_still_abandons(node: Node) -> None:
    node.env["FAKE_SYSTEMCTL_TERM"] = "start lustre-mount.service"  # e.g. cloud-init giving up on us
    result = node.run()

    assert result.returncode == 1
    assert node.aws.calls == [lifecycle_call(node, "ABANDON")]
    assert "bootstrap FAILED at step lustre (stopped unexpectedly, status 143)" in result.log
    assert "systemctl enable --now spot-watcher.service" not in result.calls
