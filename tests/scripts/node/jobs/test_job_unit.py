"""The job's unit and torchrun command line, as the runner builds them (jobs/unit.py): the systemd-run
command and the unit file come from one description, and that unit file passes ``systemd-analyze verify``."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config.naming import ResourceNames
from tests.scripts.node.helpers import read_unit
from tests.scripts.node.jobs.support import ENV_NAME, LOG_GROUP

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import layout
from jobs.settings import Settings
from jobs.unit import job_unit, systemd_run_argv, torchrun_argv, unit_file

TORCHRUN_BASE = [
    "torchrun",
    "--nnodes",
    "2",
    "--nproc-per-node",
    "8",
    "--rdzv-backend",
    "c10d",
    "--rdzv-endpoint",
    "10.0.12.7:29400",
    "--rdzv-id",
    "llama-7b",
    "--max-restarts",
    "3",
]


def _torchrun(command: str) -> list[str]:
    return torchrun_argv(
        Settings().torchrun,
        job="llama-7b",
        nodes=2,
        procs_per_node=8,
        rdzv_endpoint="10.0.12.7:29400",
        max_restarts=3,
        command=shlex.split(command),
    )


@pytest.mark.parametrize(
    ("command", "tail"),
    [
        # A Python script: torchrun runs it with its own interpreter (the venv's).
        (
            "python3 /opt/gpu-platform/examples/train_ddp.py --epochs 2",
            ["/opt/gpu-platform/examples/train_ddp.py", "--epochs", "2"],
        ),
        ("/usr/bin/python3.10 train.py", ["train.py"]),
        ("python -m my_pkg.train --lr 3e-4", ["--module", "my_pkg.train", "--lr", "3e-4"]),
        # Anything else is an executable, as is (found on the job's PATH).
        ("./run.sh --fast", ["--no-python", "./run.sh", "--fast"]),
        ("python3 -u train.py", ["--no-python", "python3", "-u", "train.py"]),
        ("bash -c 'echo $RANK'", ["--no-python", "bash", "-c", "echo $RANK"]),
    ],
)
def test_the_command_becomes_torchrun_arguments(command: str, tail: list[str]) -> None:
    assert _torchrun(command) == TORCHRUN_BASE + tail


def test_the_unit_file_and_the_systemd_run_command_say_the_same() -> None:
    unit = job_unit("llama-7b", "/fsx/work/llama", Settings())
    argv = systemd_run_argv(unit)
    assert argv[:5] == ["systemd-run", "--unit", "gpu-job-llama-7b.service", "--description", unit.description]
    separator = argv.index("--")
    properties = [argv[i + 1] for i in range(5, separator, 2)]
    assert all(argv[i] == "--property" for i in range(5, separator, 2))
    exec_start = argv[separator + 1 :]

    parsed = read_unit_text(unit_file(unit))
    as_file = [f"{k}={v}" for k, values in parsed["Unit"].items() if k != "Description" for v in values]
    as_file += [f"{k}={v}" for k, values in parsed["Service"].items() if k != "ExecStart" for v in values]
    assert sorted(properties) == sorted(as_file)
    assert shlex.split(parsed["Service"]["ExecStart"][0]) == exec_start
    # The supervisor of this job, from the node scripts; never the user's command.
    assert exec_start == [
        "/usr/bin/python3",
        "-m",
        "jobs.runner",
        "supervise",
        "--job-id",
        "llama-7b",
        "--state-dir",
        "/var/lib/gpu-platform/jobs",
    ]
    service = parsed["Service"]
    assert service["WorkingDirectory"] == ["/fsx/work/llama"]
    assert service["KillMode"] == ["mixed"] and service["Restart"] == ["no"]
    assert service["LimitMEMLOCK"] == ["infinity"]
    assert service["EnvironmentFile"] == [f"-{layout.ENV_FILE}", f"-{layout.EFA_NODE_ENV_FILE}"]
    env = dict(value.split("=", 1) for value in service["Environment"])
    assert env["PYTHONPATH"] == layout.INSTALL_PREFIX
    assert env["PATH"].split(":")[0] == "/opt/gpu-platform/venv/bin"
    assert env["GPU_PLATFORM_JOB_ID"] == "llama-7b"


def read_unit_text(text: str) -> dict[str, dict[str, list[str]]]:
    path = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
    scratch = path / f"unit-{id(text)}.service"
    scratch.write_text(text)
    try:
        return read_unit(scratch)
    finally:
        scratch.unlink()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("workdir", ["/fsx", "/fsx/teams/nlp/run-01"])
def test_the_rendered_unit_passes_systemd_analyze_verify(tmp_path: Path, workdir: str) -> None:
    settings = Settings(python=sys.executable)  # verify checks that ExecStart's program exists
    unit = job_unit("run_01.a-b", workdir, settings)
    path = tmp_path / unit.name
    path.write_text(unit_file(unit))
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    # verify exits 0 on unknown keys and bad values too; it names the file in each warning.
    warnings = [line for line in done.stderr.splitlines() if str(path) in line]
    assert done.returncode == 0 and not warnings, done.stderr


def test_the_names_match_the_platform_and_the_checkpoint_contract() -> None:
    names = ResourceNames(env=ENV_NAME, account="111122223333", region="us-east-1")
    assert names.job_log_group == LOG_GROUP  # what the supervisor ships to (jobs/runner.py)
    assert ResourceNames.job_log_stream("llama-7b", "i-0abc") == "llama-7b/i-0abc"
    assert job_unit("j", "/fsx", Settings()).name == "gpu-job-j.service"
    assert Settings().training_pid_dir == layout.NODE_ENV_OPTIONAL["TRAINING_PID_DIR"]
    assert Settings().checkpoint_dir == layout.NODE_ENV_OPTIONAL["CHECKPOINT_DIR"]
    assert Settings().node_dir == layout.INSTALL_PREFIX
    assert Settings().node_env_file == layout.ENV_FILE and Settings().efa_node_env_file == layout.EFA_NODE_ENV_FILE
