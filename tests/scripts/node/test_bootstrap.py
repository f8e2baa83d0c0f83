"""bootstrap.sh end to end: a fake IMDS, fake system binaries, the real gpu_health.py replaying
recorded nvidia-smi output, and a moto-backed Auto Scaling endpoint for the launch lifecycle hook."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.scripts.node.fake_aws import FakeAws
from tests.scripts.node.fake_node import (
    BOOTSTRAP,
    STEPS,
    Node,
    Result,
    assert_abandoned,
    lifecycle_call,
    new_node,
    stop_service,
)
from tests.scripts.node.helpers import FIXTURES, NODE_DIR, FakeImds

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import layout

T4_SMI = "".join(
    f"{i}, Tesla T4, 00000000:00:{0x1B + i:02X}.0, Enabled, 0, 30\n" for i in range(4)
)  # g4dn.12xlarge: 4 x T4


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
