"""What the job runner's tests share (no tests here): a node folder, a small stand-in for systemd, and a
CloudWatch Logs endpoint on 127.0.0.1 backed by moto.

systemd does not run in the test container, so ``systemd-run`` and ``systemctl`` are replaced by two small
programs on PATH that keep the units' state in a JSON file: ``systemd-run`` starts the unit's command the
way the service manager would (a clean environment: the unit's ``Environment=`` and ``EnvironmentFile=``,
plus the manager's default environment, here the test's ``AWS_*`` client settings; its
``WorkingDirectory=``), in a session of its own, and records how it ended (a successful transient unit is
unloaded, a failed one stays ``failed`` until ``reset-failed``, as systemd does); ``systemctl show / stop /
reset-failed`` read and change that state (``stop``: SIGTERM to the main process only, ``KillMode=mixed``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from tests.scripts.node.helpers import NODE_DIR, ROOT, FakeImds, LoopbackServer
from tests.scripts.node.training_job import install_fake_torchrun, write_worker

EXAMPLES_DIR = ROOT / "examples"
REGION = "us-east-1"
ENV_NAME = "dev"
INSTANCE_ID = "i-0a1b2c3d4e5f60718"
LOG_GROUP = f"/gpu-platform/{ENV_NAME}/jobs"

_FAKE_SYSTEMD = r"""
import fcntl, json, os, signal, subprocess, sys, time
STATE = os.environ["FAKE_SYSTEMD_STATE"]
DEFAULTS = {"LoadState": "not-found", "ActiveState": "inactive", "Result": "success",
            "ExecMainCode": "0", "ExecMainStatus": "0"}

def locked(change=None):
    with open(STATE + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        units = json.loads(open(STATE).read()) if os.path.exists(STATE) else {}
        if change:
            change(units)
            with open(STATE + ".new", "w") as out:
                out.write(json.dumps(units))
            os.replace(STATE + ".new", STATE)
        return units

def log_call(tool, argv):
    with open(STATE + ".calls", "a") as out:
        out.write(json.dumps([tool, *argv]) + "\n")

def monitor(unit, command, env, cwd, journal):
    with open(journal, "ab") as out:
        child = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    locked(lambda u: u[unit].update(MainPID=child.pid))
    code = child.wait()
    def ended(units):
        entry = units[unit]
        if code == 0 or code == -signal.SIGTERM:  # SIGTERM is a clean stop for systemd
            units.pop(unit)  # a transient unit that ended well is unloaded
        else:
            entry.update(ActiveState="failed", Result="exit-code" if code > 0 else "signal",
                         ExecMainCode="1" if code > 0 else "2", ExecMainStatus=str(abs(code)), MainPID=0)
    locked(ended)

def systemd_run(argv):
    log_call("systemd-run", argv)
    unit, props, rest = None, [], list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            break
        if arg in ("--unit", "--description", "--property"):
            value = rest.pop(0)
            if arg == "--unit":
                unit = value
            elif arg == "--property":
                props.append(value.split("=", 1))
    if locked().get(unit, {}).get("LoadState") == "loaded":
        print(f"Failed to start transient service unit: Unit {unit} already exists.", file=sys.stderr)
        return 1
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}  # the manager's DefaultEnvironment
    cwd, stop_s = "/", 90
    for key, value in props:
        if key == "Environment":
            name, _, val = value.partition("=")
            env[name] = val
        elif key == "EnvironmentFile":
            path = value.lstrip("-")
            if os.path.exists(path):
                for line in open(path).read().splitlines():
                    name, sep, val = line.partition("=")
                    if sep and not name.startswith("#"):
                        env[name.strip()] = val
            elif not value.startswith("-"):
                print(f"missing EnvironmentFile {path}", file=sys.stderr)
                return 1
        elif key == "WorkingDirectory":
            cwd = value
        elif key == "TimeoutStopSec":
            stop_s = int(value)
    command = rest
    if not os.path.isabs(command[0]):
        print(f"ExecStart= must be absolute: {command[0]}", file=sys.stderr)
        return 1
    locked(lambda u: u.__setitem__(unit, {**DEFAULTS, "LoadState": "loaded", "ActiveState": "active",
                                           "MainPID": 0, "TimeoutStopSec": stop_s}))
    journal = STATE + "." + unit + ".journal"
    subprocess.Popen([sys.executable, __file__, "--monitor", unit, json.dumps(command), json.dumps(env), cwd, journal],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)  # the unit is detached from the caller, as under systemd
    deadline = time.monotonic() + 10  # Type=exec: return once the main process runs
    while not locked().get(unit, {}).get("MainPID") and unit in locked() and time.monotonic() < deadline:
        time.sleep(0.01)
    return 0

def systemctl(argv):
    log_call("systemctl", argv)
    verb, unit = argv[0], argv[1]
    entry = {**DEFAULTS, **locked().get(unit, {})}
    if verb == "show":
        wanted = next(a.split("=", 1)[1] for a in argv if a.startswith("--property=")).split(",")
        for key in wanted:
            print(f"{key}={entry.get(key, '')}")
    elif verb == "stop":
        if entry["ActiveState"] == "active":
            locked(lambda u: u[unit].update(ActiveState="deactivating"))
            pid = entry["MainPID"]
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + entry["TimeoutStopSec"]
            while unit in locked() and locked()[unit]["ActiveState"] == "deactivating":
                if time.monotonic() > deadline:
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
                    break
                time.sleep(0.02)
    elif verb == "reset-failed":
        locked(lambda u: u.pop(unit) if u.get(unit, {}).get("ActiveState") == "failed" else None)
    return 0

if sys.argv[1] == "--monitor":
    monitor(sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5], sys.argv[6])
elif os.path.basename(sys.argv[0]) == "systemd-run":
    sys.exit(systemd_run(sys.argv[1:]))
else:
    sys.exit(systemctl(sys.argv[1:]))
"""


class FakeLogs(LoopbackServer):
    """CloudWatch Logs (AWS JSON 1.1) on 127.0.0.1: each request the node's boto3 sends is replayed on moto's
    logs backend in this process (``mock_aws`` must be active) and answered with moto's result."""

    def __init__(self) -> None:
        self.client = boto3.client("logs", region_name=REGION)
        self.calls: list[str] = []

    def _handle(self, target: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        operation = target.rsplit(".", 1)[-1]
        self.calls.append(operation)
        method = getattr(self.client, _method_to_api_reverse(self.client.meta)[operation])
        try:
            answer = method(**body)
        except ClientError as err:
            return 400, {"__type": err.response["Error"]["Code"], "message": err.response["Error"]["Message"]}
        answer.pop("ResponseMetadata", None)
        return 200, answer

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer = fake._handle(self.headers.get("X-Amz-Target", ""), json.loads(raw or b"{}"))
                data = json.dumps(answer, default=str).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def events(self, stream: str) -> list[str]:
        answer = self.client.get_log_events(logGroupName=LOG_GROUP, logStreamName=stream, startFromHead=True)
        return [event["message"] for event in answer["events"]]


def _method_to_api_reverse(meta: Any) -> dict[str, str]:
    return {api: method for method, api in meta.method_to_api_mapping.items()}


@dataclass
class JobNode:
    """One node's folders under the test's tmp_path, its fake systemd, torchrun, IMDS and CloudWatch Logs."""

    root: Path
    imds: FakeImds
    logs: FakeLogs
    bin_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def path(self, on_node: str) -> Path:
        return self.root / on_node.lstrip("/")

    @property
    def pid_dir(self) -> Path:
        return self.path("/run/gpu-platform/jobs")

    @property
    def checkpoints(self) -> Path:
        return self.path("/fsx/checkpoints")

    @property
    def state_file(self) -> Path:
        return self.root / "systemd-state.json"

    @property
    def worker_record(self) -> Path:
        return self.root / "workers.jsonl"

    @property
    def torchrun_record(self) -> Path:
        return self.root / "torchrun.jsonl"

    def settings_env(self) -> dict[str, str]:
        """The runner's settings moved into the test folder (each an environment variable; see jobs/settings.py)."""
        return {
            "NODE_DIR": str(NODE_DIR),
            "JOB_PYTHON": sys.executable,
            "JOB_TORCHRUN": "torchrun",
            "JOB_PATH": f"{self.bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "NODE_ENV_FILE": str(self.path("/etc/gpu-platform/node.env")),
            "EFA_NODE_ENV_FILE": str(self.path("/etc/gpu-platform/efa-node.env")),
            "JOB_STATE_DIR": str(self.path("/var/lib/gpu-platform/jobs")),
            "JOB_LOG_DIR": str(self.path("/var/log/gpu-platform/jobs")),
            "SYSTEMCTL_BIN": str(self.bin_dir / "systemctl"),
            "SYSTEMD_RUN_BIN": str(self.bin_dir / "systemd-run"),
            "IMDS_URL": self.imds.url,
        }

    def runner(self, action: str, job: str, *args: str, aws_env: dict[str, str] | None = None) -> tuple[int, dict, str]:
        """``python3 -m jobs.runner ACTION --job-id JOB ...`` as the job document runs it; (exit, JSON, stderr)."""
        env = {
            "PATH": f"{self.bin_dir}:{os.environ['PATH']}",
            "PYTHONPATH": str(NODE_DIR),
            "FAKE_SYSTEMD_STATE": str(self.state_file),
            **self.settings_env(),
            **(self.logs_env() if aws_env is None else aws_env),
            **self.extra_env,
        }
        done = subprocess.run(
            [sys.executable, "-m", "jobs.runner", action, "--job-id", job, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        lines = done.stdout.strip().splitlines()
        return done.returncode, (json.loads(lines[-1]) if lines else {}), done.stderr

    def logs_env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.logs.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def units(self) -> dict[str, dict[str, Any]]:
        return json.loads(self.state_file.read_text()) if self.state_file.exists() else {}

    def systemd_calls(self) -> list[list[str]]:
        calls = Path(f"{self.state_file}.calls")
        return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []

    def records(self, path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def wait_for(self, what: str, predicate: Any, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.02)

    def wait_until_ended(self, unit: str, timeout_s: float = 60) -> None:
        self.wait_for(
            f"{unit} to end",
            lambda: self.units().get(unit, {}).get("ActiveState") not in ("active", "deactivating"),
            timeout_s,
        )

    def job_log(self, job: str) -> str:
        path = self.path(f"/var/log/gpu-platform/jobs/{job}.log")
        return path.read_text() if path.exists() else ""

    def worker_env(self, *, steps: int, every: int, step_s: float, exit_code: int = 0) -> None:
        """The stand-in worker's knobs, through node.env (the unit's EnvironmentFile=)."""
        node_env = self.path("/etc/gpu-platform/node.env")
        node_env.write_text(
            node_env.read_text()
            + "".join(
                f"{k}={v}\n"
                for k, v in {
                    "EXAMPLES_DIR": EXAMPLES_DIR,
                    "STEPS": steps,
                    "EVERY": every,
                    "STEP_S": step_s,
                    "EXIT_CODE": exit_code,
                    "WORKER_RECORD": self.worker_record,
                    "FAKE_TORCHRUN_RECORD": self.torchrun_record,
                }.items()
            )
        )


def job_node_on(root: Path, imds: FakeImds, logs: FakeLogs) -> JobNode:
    """A node in ``root``: fake systemd and torchrun, its /etc/gpu-platform, pid, checkpoint and work folders,
    the stand-in worker in /fsx/work; ``imds`` answers its instance id, ``logs`` is its CloudWatch Logs."""
    bin_dir = root / "bin"
    install_fake_torchrun(bin_dir)
    for name in ("systemd-run", "systemctl"):
        tool = bin_dir / name
        tool.write_text(f"#!{sys.executable}\n{_FAKE_SYSTEMD}")
        tool.chmod(0o755)
    for folder in ("/etc/gpu-platform", "/run/gpu-platform/jobs", "/fsx/checkpoints", "/fsx/work"):
        (root / folder.lstrip("/")).mkdir(parents=True)
    (root / "etc/gpu-platform/node.env").write_text(
        f"GPU_PLATFORM_ENV={ENV_NAME}\nAWS_REGION={REGION}\nFLEET_NAME=training\n"
        f"TRAINING_PID_DIR={root / 'run/gpu-platform/jobs'}\nCHECKPOINT_DIR={root / 'fsx/checkpoints'}\n"
        f"FSX_MOUNT_POINT={root / 'fsx'}\n"
    )
    (root / "etc/gpu-platform/efa-node.env").write_text("FI_PROVIDER=efa\nFI_EFA_USE_DEVICE_RDMA=1\nNCCL_DEBUG=WARN\n")
    write_worker(root / "fsx/work")
    node = JobNode(root, imds, logs, bin_dir)
    # As on a node in service: Lustre mounted at FSX_MOUNT_POINT (the runner makes a missing workdir only there).
    (root / "proc").mkdir()
    (root / "proc/mounts").write_text(
        f"/dev/nvme0n1p1 / ext4 rw,relatime 0 0\n10.0.1.23@tcp:/abcdefgh {root / 'fsx'} lustre rw,flock 0 0\n"
    )
    node.extra_env["PROC_MOUNTS"] = str(root / "proc/mounts")
    return node


def kill_units(node: JobNode) -> None:
    """Whatever still runs in the node's units (nothing outlives a test)."""
    for unit in node.units().values():
        pid = unit.get("MainPID")
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), 9)


def start(node: JobNode, job: str, command: str, *extra: str, **kwargs: object) -> tuple[int, dict, str]:
    """``jobs.runner start`` of ``command`` as job ``job``: one node, two processes, one restart, /fsx/work."""
    return node.runner(
        "start",
        job,
        "--nodes",
        "1",
        "--procs-per-node",
        "2",
        "--rdzv-endpoint",
        "127.0.0.1:29400",
        "--workdir",
        "/fsx/work",  # node.env's FSX_MOUNT_POINT puts /fsx in the test folder
        "--max-restarts",
        "1",
        "--command",
        command,
        *extra,
        **kwargs,  # type: ignore[arg-type]
    )


def run_hook(node: JobNode) -> subprocess.CompletedProcess[str]:
    """The real checkpoint-hook.sh on an interruption notice, against the node's jobs and checkpoints."""
    env = {
        "PATH": os.environ["PATH"],
        "TRAINING_PID_DIR": str(node.pid_dir),
        "CHECKPOINT_DIR": str(node.checkpoints),
        "CHECKPOINT_STATE_DIR": str(node.path("/run/gpu-platform")),
        "CHECKPOINT_TIMEOUT": "30",
        "CHECKPOINT_POLL": "0.05",
        "NOTICE_KIND": "interruption",
    }
    return subprocess.run(
        ["bash", str(NODE_DIR / "checkpoint-hook.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def events(node: JobNode, kind: str) -> list[dict]:
    """The stand-in workers' records of ``kind``."""
    return [r for r in node.records(node.worker_record) if r["event"] == kind]
