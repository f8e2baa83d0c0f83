"""CUDA's unified memory device files for the served model: made as root before the server starts (the unit's
ExecStartPre=+, serving.launch prepare), and a failure fails the start with one line. The bootstrap's side (the
launch abandoned with that line in its log) is in test_service_bootstrap.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.scripts.node.helpers import UNIT_DIR, read_unit
from tests.scripts.node.serving.support import COMMAND, IMAGE, UVM_CALL, node_module, write

# isort: split
from serving import launch, settings, unit


def test_cuda_device_files_are_made_as_root_before_the_server_starts() -> None:
    """A command runs under NoNewPrivileges=, where the setuid nvidia-modprobe that CUDA runs on first use cannot
    create /dev/nvidia-uvm. The unit's one ExecStartPre= (systemd runs it before ExecStart=) is the launcher's
    prepare, with "+" (root, outside the sandbox and the dynamic user) and without "-" (a failure fails the start)."""
    assert "NoNewPrivileges=yes" in unit.render_drop_in(settings.parse(json.dumps(COMMAND))).splitlines()
    (pre,) = read_unit(UNIT_DIR / unit.UNIT)["Service"]["ExecStartPre"]
    assert pre.startswith("+/")
    argv = shlex.split(pre.removeprefix("+"))
    assert argv[1:4] == ["-m", "serving.launch", "prepare"]
    parsed = launch.build_parser().parse_args(argv[3:])
    assert parsed.nvidia_modprobe == "/usr/bin/nvidia-modprobe"  # the driver's, on the DLAMI
    assert launch.UVM_FLAGS == ("--unified-memory", "--create-nvidia-device-file=0")  # -u -c 0: minors 0 and 1


@pytest.mark.parametrize("data", [COMMAND, IMAGE], ids=["command", "image"])
def test_cuda_device_files_that_cannot_be_made_fail_the_start_in_one_line(
    tmp_path: Path, docker: Path, modprobe: Path, data: dict
) -> None:
    calls = tmp_path / "calls"
    env = {"DOCKER_CALLS": str(calls), "NVIDIA_MODPROBE_FAILS": "1"}
    done = node_module(
        "serving.launch", "prepare", "--config", str(write(tmp_path, data)), "--docker", str(docker),
        "--nvidia-modprobe", str(modprobe), env=env,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"gpu-service: cannot create /dev/nvidia-uvm and /dev/nvidia-uvm-tools ({modprobe} --unified-memory "
        "--create-nvidia-device-file=0: exit 1); fix: the image needs the NVIDIA driver's nvidia-uvm module and "
        "nvidia-modprobe (`modprobe nvidia-uvm` says why it fails)"
    ]
    assert calls.read_text().splitlines() == [UVM_CALL]  # no pull


def test_a_missing_nvidia_modprobe_fails_the_start_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-nvidia-modprobe"
    done = node_module(
        "serving.launch", "prepare", "--config", str(write(tmp_path, COMMAND)), "--nvidia-modprobe", str(missing)
    )
    assert done.returncode == 1
    assert f"({missing} --unified-memory --create-nvidia-device-file=0: not found); fix: " in done.stderr
