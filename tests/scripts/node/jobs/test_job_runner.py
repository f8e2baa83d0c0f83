"""The job runner end to end on one node: ``jobs.runner start`` (as the job document runs it) -> systemd-run
-> the supervisor (the real one) -> torchrun (a stand-in) -> training workers (stand-ins that follow the
training contract); then ``status`` and ``stop``. systemd is the small stand-in of test_job_support.py; the
instance id comes from a fake IMDSv2 and the job's output goes to moto's CloudWatch Logs, both on 127.0.0.1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripts.node.jobs.support import INSTANCE_ID, LOG_GROUP, JobNode, start
from tests.scripts.node.training_job import install_fake_torchrun

# isort: split
import layout
from jobs import supervisor as supervisor_module
from jobs.supervisor import JobOutput, Supervisor

UNIT = "gpu-job-{}.service"


def test_start_runs_the_job_under_its_supervisor_and_ships_its_output(job_node: JobNode) -> None:
    node = job_node
    node.worker_env(steps=6, every=3, step_s=0.05)
    code, started, err = start(node, "smoke-1", f"python3 {node.path('/fsx/work/train_standin.py')} --lr 0.1")
    assert code == 0, err
    assert started["job"] == "smoke-1" and started["unit"] == UNIT.format("smoke-1")
    assert started["instance_id"] == INSTANCE_ID
    assert started["state"] in ("active", "inactive"), started  # a short job may have ended already

    node.wait_until_ended(UNIT.format("smoke-1"))
    code, status, _ = node.runner("status", "smoke-1")
    assert code == 0
    assert status == {
        "job": "smoke-1",
        "instance_id": INSTANCE_ID,
        "unit": "gpu-job-smoke-1.service",
        "state": "inactive",
        "result": "success",
        "exit_code": 0,
        "started_at": status["started_at"],
    }
    assert status["started_at"].endswith("Z")

    # systemd-run got the unit of jobs/unit.py; torchrun got the job's parameters and the script.
    (run,) = [call for call in node.systemd_calls() if call[0] == "systemd-run"]
    assert run[1:3] == ["--unit", "gpu-job-smoke-1.service"]
    assert "--property" in run and "KillMode=mixed" in run
    (torchrun,) = node.records(node.torchrun_record)
    assert torchrun["argv"] == [
        "--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29400",
        "--rdzv-id", "smoke-1", "--max-restarts", "1", str(node.path("/fsx/work/train_standin.py")), "--lr", "0.1",
    ]  # fmt: skip
    # Both workers ran from step 0 and rank 0 checkpointed every 3 steps, atomically.
    starts = [r for r in node.records(node.worker_record) if r["event"] == "start"]
    assert sorted(r["rank"] for r in starts) == [0, 1] and {r["step"] for r in starts} == {0}
    assert sorted(p.name for p in (node.checkpoints / "smoke-1").iterdir()) == [
        "step-000000003.pt",
        "step-000000006.pt",
    ]
    # The pid file is gone; the output is in the local file AND in the job's stream.
    assert not (node.pid_dir / "smoke-1.pid").exists()
    local = node.job_log("smoke-1")
    for line in ("rank 0: job smoke-1 starting at step 0", "rank 1: done at step 6", "torchrun exited with status 0"):
        assert line in local
    shipped = node.logs.events(f"smoke-1/{INSTANCE_ID}")
    assert "rank 1: done at step 6" in shipped and "gpu-job: torchrun exited with status 0" in shipped
    assert [line for line in local.splitlines()] == shipped
    # The workers ran in the working directory with the node's NCCL/EFA environment (the unit's
    # EnvironmentFile=), told that the runner owns the pid file, without the node scripts on PYTHONPATH.
    for worker in starts:
        assert worker["cwd"] == str(node.path("/fsx/work"))
        assert worker["env"] == {
            "FI_PROVIDER": "efa",
            "PYTHONPATH": None,
            "GPU_PLATFORM_JOB_SUPERVISED": "1",
            "CHECKPOINT_DIR": str(node.checkpoints),
        }


def test_the_checkpoint_request_reaches_the_workers_and_not_torchrun(job_node: JobNode) -> None:
    node = job_node
    node.worker_env(steps=400, every=0, step_s=0.05)  # checkpoints on request only
    code, _, err = start(node, "sig-1", f"python3 {node.path('/fsx/work/train_standin.py')}")
    assert code == 0, err
    pid_file = node.pid_dir / "sig-1.pid"
    node.wait_for("the pid file", pid_file.exists)
    node.wait_for("both workers", lambda: len(node.records(node.worker_record)) == 2)
    supervisor = int(pid_file.read_text())
    assert supervisor == node.units()[UNIT.format("sig-1")]["MainPID"]  # the unit's main process owns it

    os.kill(supervisor, signal.SIGUSR1)  # what checkpoint-hook.sh does
    node.wait_for("a checkpoint", lambda: any(r["event"] == "checkpoint" for r in node.records(node.worker_record)))
    (checkpoint,) = [r for r in node.records(node.worker_record) if r["event"] == "checkpoint"]
    assert checkpoint["rank"] == 0
    assert node.units()[UNIT.format("sig-1")]["ActiveState"] == "active"  # torchrun survived the signal
    (torchrun,) = node.records(node.torchrun_record)
    os.kill(torchrun["pid"], 0)  # still alive
    assert "SIGUSR1 received: passed on to the workers" in node.job_log("sig-1")

    code, stopped, _ = node.runner("stop", "sig-1")
    assert code == 0
    assert stopped["state"] == "inactive" or stopped["state"] == "failed", stopped
    assert not pid_file.exists()
    # SIGTERM went supervisor -> torchrun -> workers: each stopped after a last checkpoint.
    stops = [r for r in node.records(node.worker_record) if r["event"] == "stopped"]
    assert sorted(r["rank"] for r in stops) == [0, 1]
    assert "SIGTERM received: stopping torchrun" in node.job_log("sig-1")


def test_a_failing_job_reports_its_exit_status_and_can_be_relaunched(job_node: JobNode) -> None:
    node = job_node
    node.worker_env(steps=2, every=1, step_s=0.02, exit_code=3)
    command = f"python3 {node.path('/fsx/work/train_standin.py')}"
    assert start(node, "fail-1", command)[0] == 0
    node.wait_until_ended(UNIT.format("fail-1"))
    code, status, _ = node.runner("status", "fail-1")
    assert code == 0
    # torchrun restarted the workers once (--max-restarts 1), then gave up with status 1.
    assert (status["state"], status["result"], status["exit_code"]) == ("failed", "exit-code", 1)
    restarts = sorted({r["restart"] for r in node.records(node.worker_record) if r["event"] == "start"})
    assert restarts == ["0", "1"]
    assert "torchrun exited with status 1" in node.job_log("fail-1")

    # A relaunch under the same name (job run --resume): the failed unit is reset, a pid file left by a
    # killed supervisor (a pid that no longer runs) is removed, the job resumes.
    (node.pid_dir / "fail-1.pid").write_text("999999999\n")
    code, _, err = start(node, "fail-1", command)
    assert code == 0, err
    assert ["systemctl", "reset-failed", "gpu-job-fail-1.service"] in node.systemd_calls()
    node.wait_until_ended(UNIT.format("fail-1"))
    resumed = [r for r in node.records(node.worker_record) if r["event"] == "start"][-1]
    assert resumed["step"] == 2  # from the newest complete checkpoint of the first run


def test_an_active_job_is_not_started_twice(job_node: JobNode) -> None:
    node = job_node
    node.worker_env(steps=400, every=0, step_s=0.05)
    command = f"python3 {node.path('/fsx/work/train_standin.py')}"
    assert start(node, "twice", command)[0] == 0
    code, refused, err = start(node, "twice", command)
    assert code == 1
    assert refused["state"] == "active" and "already active" in refused["error"]
    assert err.startswith("jobs.runner: job twice is already active")
    assert len([call for call in node.systemd_calls() if call[0] == "systemd-run"]) == 1
    node.runner("stop", "twice")
    # A job of that name started by hand (its own live pid file) is not started over either.
    (node.pid_dir / "twice.pid").write_text(f"{os.getpid()}\n")
    code, refused, _ = start(node, "twice", command)
    assert code == 1 and "names a live process" in refused["error"]


@pytest.mark.slow  # the supervisor retries the last lines for SHIP_CLOSE_TIMEOUT_S before it exits
def test_the_job_keeps_its_output_when_cloudwatch_logs_cannot_be_reached(job_node: JobNode) -> None:
    node = job_node
    node.worker_env(steps=3, every=0, step_s=0.02)
    unreachable = {**node.logs_env(), "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # nothing listens there
    code, _, err = start(node, "offline", f"python3 {node.path('/fsx/work/train_standin.py')}", aws_env=unreachable)
    assert code == 0, err
    node.wait_until_ended(UNIT.format("offline"), timeout_s=90)
    assert node.runner("status", "offline")[1]["exit_code"] == 0
    local = node.job_log("offline")
    assert "rank 0: done at step 3" in local and "rank 1: done at step 3" in local
    assert "gpu-job: cannot ship to /gpu-platform/dev/jobs:offline/" in local
    assert "some lines were not shipped to CloudWatch Logs before the end" in local
    assert LOG_GROUP  # the group exists in moto, but nothing reached it
    assert node.logs.calls == []


def test_status_of_an_unknown_job_and_bad_input(job_node: JobNode) -> None:
    node = job_node
    code, status, _ = node.runner("status", "never-ran")
    assert code == 0
    assert (status["state"], status["result"], status["exit_code"], status["started_at"]) == (
        "unknown",
        None,
        None,
        None,
    )
    for args, message in (
        (["--job-id", "../etc"], "--job-id '../etc'"),
        (["--job-id", "ok", "--workdir", "/tmp"], "--workdir '/tmp' does not match"),
        (["--job-id", "ok", "--rdzv-endpoint", "999.1.1.1:29400"], "is not an IPv4 address"),
        (["--job-id", "ok"], "--command is empty"),
        (["--job-id", "ok", "--command", "python3 'unclosed"], "cannot be split into words"),
    ):
        code, _, err = node.runner("start", args[1], *args[2:])
        assert code == 2, (args, err)
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_workdir_that_is_not_there_is_refused(job_node: JobNode) -> None:
    node = job_node
    lustre_mount_table(node, lustre=False)
    code, _, err = start(node, "nowhere", "python3 x.py", "--workdir", "/fsx/no/such/dir")
    assert code == 2 and "is not a directory on this node" in err
    assert node.systemd_calls() == []


def lustre_mount_table(node: JobNode, *, lustre: bool) -> None:
    """A mount table (PROC_MOUNTS) in which the test's /fsx is, or is not, the Lustre file system."""
    table = node.path("/proc/mounts")
    table.parent.mkdir(parents=True, exist_ok=True)
    lines = ["/dev/nvme0n1p1 / ext4 rw,relatime 0 0"]
    if lustre:
        lines.append(f"10.0.1.23@tcp:/abcdefgh {node.path('/fsx')} lustre rw,relatime,flock,lazystatfs 0 0")
    table.write_text("\n".join(lines) + "\n")
    node.extra_env["PROC_MOUNTS"] = str(table)


def test_the_default_workdir_is_created_on_mounted_lustre(job_node: JobNode) -> None:
    """`gpu-platform job run` without --workdir passes /fsx/jobs/<job>, which nothing has created yet."""
    node = job_node
    lustre_mount_table(node, lustre=True)
    node.worker_env(steps=2, every=0, step_s=0.02)
    code, _, err = start(
        node, "fresh-1", f"python3 {node.path('/fsx/work/train_standin.py')}", "--workdir", "/fsx/jobs/fresh-1"
    )
    assert code == 0, err
    node.wait_until_ended(UNIT.format("fresh-1"))
    assert node.runner("status", "fresh-1")[1]["exit_code"] == 0
    for folder in ("/fsx/jobs", "/fsx/jobs/fresh-1"):
        assert node.path(folder).is_dir() and node.path(folder).stat().st_mode & 0o777 == 0o755, folder
    starts = [r for r in node.records(node.worker_record) if r["event"] == "start"]
    assert {r["cwd"] for r in starts} == {str(node.path("/fsx/jobs/fresh-1"))}  # the unit ran the job there


def test_no_workdir_is_created_where_lustre_is_not_mounted(job_node: JobNode) -> None:
    node = job_node
    lustre_mount_table(node, lustre=False)  # /fsx is a plain folder of the root disk
    code, _, err = start(node, "unmounted", "python3 x.py", "--workdir", "/fsx/jobs/unmounted")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "is not a directory on this node" in err and "is not a mounted Lustre file system" in err
    assert not node.path("/fsx/jobs").exists() and node.systemd_calls() == []
    # /fsx itself missing: refused too, whatever the mount table says.
    lustre_mount_table(node, lustre=True)
    node.extra_env["FSX_MOUNT_POINT"] = str(node.path("/no-fsx"))
    code, _, err = start(node, "unmounted", "python3 x.py", "--workdir", "/fsx/jobs/unmounted")
    assert code == 2 and "is not a mounted Lustre file system" in err, err
    assert not node.path("/no-fsx").exists() and node.systemd_calls() == []


TORCHRUN_STANDIN = """
import pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1])
(out / "started").touch()
def stop(_signum, _frame):
    (out / "terminated").touch()
    sys.exit(1)
signal.signal(signal.SIGTERM, stop)
time.sleep(10)
(out / "finished").touch()
"""


@pytest.fixture
def signal_handlers() -> Iterator[None]:
    """The supervisor runs in this process (to time the signal exactly): its handlers are undone after."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def supervise_in_process(tmp_path: Path) -> tuple[int, float, str]:
    """The real supervisor, torchrun a stand-in that runs 10 s unless stopped: (status, seconds, job log)."""
    (tmp_path / "torchrun.py").write_text(TORCHRUN_STANDIN)
    output = JobOutput(tmp_path / "job.log", None)
    supervisor = Supervisor(
        "early-stop",
        [sys.executable, str(tmp_path / "torchrun.py"), str(tmp_path)],
        workdir=str(tmp_path),
        env=dict(os.environ),
        pid_file=tmp_path / "early-stop.pid",
        output=output,
    )
    started = time.monotonic()
    try:
        status = supervisor.run()
    finally:
        output.close()
    return status, time.monotonic() - started, (tmp_path / "job.log").read_text()


def test_a_stop_before_torchrun_is_started_starts_no_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_handlers: None
) -> None:
    """systemctl stop right after systemd-run: SIGTERM reaches the supervisor once its handlers are in place
    (here: as soon as the last one is), before torchrun exists. The job must not start at all."""
    install = signal.signal

    def install_then_stop(signum: int, handler: object) -> object:
        previous = install(signum, handler)  # type: ignore[arg-type]
        if signum == signal.SIGINT:  # the supervisor's last handler
            signal.raise_signal(signal.SIGTERM)
        return previous

    monkeypatch.setattr(supervisor_module.signal, "signal", install_then_stop)
    status, seconds, log = supervise_in_process(tmp_path)
    monkeypatch.undo()
    assert status == 128 + signal.SIGTERM and seconds < 5
    assert not (tmp_path / "started").exists()
    assert "gpu-job: SIGTERM received before torchrun started\ngpu-job: the job is not started\n" in log
    assert not (tmp_path / "early-stop.pid").exists()


def test_a_stop_while_torchrun_is_being_started_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_handlers: None
) -> None:
    """SIGTERM while Popen runs (torchrun not yet known to the handler): torchrun is stopped once it is."""
    real_popen = subprocess.Popen

    def stop_then_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        signal.raise_signal(signal.SIGTERM)
        return real_popen(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(supervisor_module.subprocess, "Popen", stop_then_popen)
    status, seconds, log = supervise_in_process(tmp_path)
    monkeypatch.undo()
    assert (tmp_path / "started").exists() or status == 128 + signal.SIGTERM  # stopped before its first line
    assert not (tmp_path / "finished").exists() and seconds < 5
    assert status in (1, 128 + signal.SIGTERM)
    assert log.count("SIGTERM received: stopping torchrun") == 1  # passed on once
    assert "the job is not started" not in log
    assert not (tmp_path / "early-stop.pid").exists()


def _on_this_node(node: JobNode, path: str) -> str:
    """A PATH of the node's layout with its /opt folders moved under the test's node root."""
    return ":".join(str(node.path(d)) if d.startswith("/opt/") else d for d in path.split(":"))


def test_on_the_bootstrap_ami_the_job_runs_the_deep_learning_amis_torchrun(job_node: JobNode) -> None:
    # Before the first golden AMI: no /opt/gpu-platform/venv, but the Deep Learning AMI's /opt/pytorch.
    node = job_node
    install_fake_torchrun(node.path(f"{layout.BOOTSTRAP_PYTORCH_ENV}/bin"))
    assert not node.path(layout.WORKLOAD_VENV).exists()
    node.extra_env["JOB_PATH"] = _on_this_node(node, layout.WORKLOAD_PATH)
    node.worker_env(steps=2, every=1, step_s=0.02)
    code, _, err = start(node, "first-deploy", f"python3 {node.path('/fsx/work/train_standin.py')}")
    assert code == 0, err
    node.wait_until_ended(UNIT.format("first-deploy"))
    code, status, _ = node.runner("status", "first-deploy")
    assert (code, status["state"], status["exit_code"]) == (0, "inactive", 0), status
    assert node.records(node.torchrun_record), "the bootstrap AMI's torchrun did not run"


def _without_torchrun(node: JobNode, path: str) -> str:
    """``path`` on this node, each system folder replaced by a copy of its links without torchrun: this machine
    may have one (Debian's python3-torch), the node of this test has none."""
    dirs = []
    for i, folder in enumerate(_on_this_node(node, path).split(":")):
        if folder.startswith(str(node.root)) or not Path(folder).is_dir():
            dirs.append(folder)
            continue
        shadow = node.root / "system-path" / str(i)
        shadow.mkdir(parents=True)
        for tool in Path(folder).iterdir():
            if tool.name != "torchrun":
                (shadow / tool.name).symlink_to(tool)
        dirs.append(str(shadow))
    return ":".join(dirs)


def test_without_any_torchrun_the_job_says_which_path_it_searched(job_node: JobNode) -> None:
    node = job_node
    node.extra_env["JOB_PATH"] = _without_torchrun(node, layout.WORKLOAD_PATH)
    node.worker_env(steps=1, every=1, step_s=0.02)
    start(node, "no-torch", f"python3 {node.path('/fsx/work/train_standin.py')}")
    node.wait_until_ended(UNIT.format("no-torch"))
    _, status, _ = node.runner("status", "no-torch")
    assert status["exit_code"] == 127, status
    log = node.job_log("no-torch")
    assert f"cannot start torchrun (PATH {node.extra_env['JOB_PATH']})" in log
