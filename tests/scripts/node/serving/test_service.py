"""The service's node parts one by one: service.json as the node reads it, the drop-in with the unit it
completes (checked by systemd-analyze verify), the launcher in both modes (real processes, a fake docker
CLI), and the health wait against a loopback server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.scripts.node.helpers import NODE_DIR, UNIT_DIR, LoopbackServer, read_unit, unit_output_file
from tests.scripts.node.serving.support import COMMAND, IMAGE, UVM_CALL, node_module, write

# isort: split
import layout
from serving import launch, settings, unit, wait

# ---------------------------------------------------------------------------------------------
# service.json
# ---------------------------------------------------------------------------------------------


def test_the_bootstrap_reads_mode_port_path_and_timeout(tmp_path: Path) -> None:
    done = node_module("serving.settings", "--config", str(write(tmp_path, COMMAND)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["MODE=command", "PORT=8080", "HEALTH_CHECK_PATH=/health", "START_TIMEOUT=600"]
    done = node_module("serving.settings", "--config", str(write(tmp_path, IMAGE | {"start_timeout_seconds": 1200})))
    assert done.stdout.splitlines()[0::3] == ["MODE=image", "START_TIMEOUT=1200"]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("{", "not JSON (Expecting property name enclosed in double quotes at line 1); fix: the user data writes it"),
        (json.dumps(COMMAND | {"user": "root"}), "unknown field user; fix: keep to command, health_check_path, image, port, start_timeout_seconds"),
        (json.dumps(COMMAND | {"command": "a\nb"}), "command must be one line of 1 to 4096 characters, got 'a\\nb'"),
        (json.dumps(COMMAND | {"start_timeout_seconds": 0}), "start_timeout_seconds must be a whole number from 1 to 7200, got 0"),
    ],
)  # fmt: skip
def test_a_bad_service_file_is_one_line_naming_file_and_field(tmp_path: Path, text: str, line: str) -> None:
    path = tmp_path / "service.json"
    path.write_text(text)
    done = node_module("serving.settings", "--config", str(path))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"{path}: {line}"]


def test_a_missing_service_file_is_one_line(tmp_path: Path) -> None:
    done = node_module("serving.settings", "--config", str(tmp_path / "none.json"))
    assert (done.returncode, done.stderr.strip()) == (
        1,
        f"{tmp_path / 'none.json'}: cannot read it (No such file or directory); fix: the user data writes it",
    )


# ---------------------------------------------------------------------------------------------
# the unit and its drop-in
# ---------------------------------------------------------------------------------------------


def test_a_command_runs_as_an_unprivileged_dynamic_user_and_an_image_as_root() -> None:
    command = unit.render_drop_in(settings.parse(json.dumps(COMMAND)))
    assert {"DynamicUser=yes", "User=gpu-service", "NoNewPrivileges=yes", "Environment=PORT=8080"} <= set(
        command.splitlines()
    )
    assert "TimeoutStartSec=600" in command.splitlines()
    image = unit.render_drop_in(settings.parse(json.dumps(IMAGE)))
    assert not any(line.startswith(("User=", "DynamicUser=")) for line in image.splitlines())
    assert "Environment=PORT=9000" in image.splitlines()
    assert layout.GPU_SERVICE_DROP_IN == unit.DROP_IN and layout.GPU_SERVICE_UNIT == unit.UNIT
    assert layout.SERVICE_FILE == settings.SERVICE_FILE


def verify(tmp_path: Path, drop_in: str) -> list[str]:
    """systemd-analyze verify of the shipped unit with ``drop_in`` beside it (install paths into the repo)."""
    text = (UNIT_DIR / unit.UNIT).read_text().replace(layout.INSTALL_PREFIX, str(NODE_DIR))
    text = text.replace(f"EnvironmentFile={layout.ENV_FILE}", f"EnvironmentFile=-{layout.ENV_FILE}")
    (tmp_path / unit.UNIT).write_text(text)
    (tmp_path / unit.DROP_IN).parent.mkdir(exist_ok=True)
    (tmp_path / unit.DROP_IN).write_text(drop_in)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / unit.UNIT)],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"},  # drop-ins are looked up on the unit path
    )  # fmt: skip
    return [line for line in (done.stdout + done.stderr).splitlines() if str(tmp_path) in line]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
@pytest.mark.parametrize("data", [COMMAND, IMAGE], ids=["command", "image"])
def test_the_unit_with_its_rendered_drop_in_verifies(tmp_path: Path, data: dict) -> None:
    assert verify(tmp_path, unit.render_drop_in(settings.parse(json.dumps(data)))) == []
    # The check sees the drop-in: a wrong value there is a finding.
    assert any(
        "DynamicUser" in line or "boolean" in line for line in verify(tmp_path, "[Service]\nDynamicUser=maybe\n")
    )


def test_the_unit_logs_to_the_shipped_service_log_and_restarts_on_failure() -> None:
    service = read_unit(UNIT_DIR / unit.UNIT)["Service"]
    assert unit_output_file(UNIT_DIR / unit.UNIT) == layout.SERVICE_LOG
    assert service["Restart"] == ["on-failure"]
    assert read_unit(UNIT_DIR / unit.UNIT)["Unit"]["ConditionPathExists"] == [layout.SERVICE_FILE]


# ---------------------------------------------------------------------------------------------
# the launcher
# ---------------------------------------------------------------------------------------------


def test_an_image_is_pulled_then_run_with_the_gpus_and_its_port(tmp_path: Path, docker: Path, modprobe: Path) -> None:
    config = str(write(tmp_path, IMAGE))
    env = {"DOCKER_CALLS": str(tmp_path / "calls")}
    flags = ("--config", config, "--docker", str(docker), "--nvidia-modprobe", str(modprobe))
    for action in ("prepare", "run", "cleanup"):
        done = node_module("serving.launch", action, *flags, env=env)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        UVM_CALL,
        "rm --force gpu-service",
        "pull --quiet nvcr.io/nvidia/tritonserver:24.05-py3",
        "run --rm --name gpu-service --runtime nvidia --gpus all --publish 9000:9000 --env PORT=9000 --pull never "
        "nvcr.io/nvidia/tritonserver:24.05-py3",
        "PYTHONPATH=unset",  # the node scripts' import path is not the server's
        "rm --force gpu-service",
    ]


def test_a_pull_that_keeps_failing_fails_the_start(
    tmp_path: Path, docker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    monkeypatch.setenv("DOCKER_CALLS", str(calls))
    monkeypatch.setenv("DOCKER_PULL_FAILS", "1")
    pauses: list[float] = []
    assert launch.prepare(settings.parse(json.dumps(IMAGE)), str(docker), sleep=pauses.append) == 1
    assert calls.read_text().count("pull --quiet") == launch.PULL_ATTEMPTS
    assert pauses == [5, 10]


def test_a_command_replaces_the_launcher_split_like_a_shell_without_one(tmp_path: Path, modprobe: Path) -> None:
    out = tmp_path / "argv.json"
    script = "import json, os, sys; json.dump([sys.argv[1:], os.environ.get('PYTHONPATH'), os.environ['PORT']], open(sys.argv[1], 'w'))"
    command = f"{sys.executable} -c \"{script}\" {out} 'two words' '$HOME;rm'"
    config = str(write(tmp_path, COMMAND | {"command": command}))
    env = {"DOCKER_CALLS": str(tmp_path / "calls")}
    done = node_module("serving.launch", "prepare", "--config", config, "--nvidia-modprobe", str(modprobe), env=env)
    assert done.returncode == 0, done.stderr  # for a command, only CUDA's device files
    assert (tmp_path / "calls").read_text().splitlines() == [UVM_CALL]
    done = node_module("serving.launch", "run", "--config", config, env={"PORT": "8080"})
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == [[str(out), "two words", "$HOME;rm"], None, "8080"]


def unit_environment(path: Path) -> dict[str, str]:
    """The Environment= of a unit file, as systemd hands it to ExecStart."""
    return dict(value.split("=", 1) for value in read_unit(path)["Service"]["Environment"])


def test_python3_in_the_command_is_the_pytorch_venvs(tmp_path: Path) -> None:
    """dev's command (``python3 /opt/gpu-platform/examples/serve.py``) under the unit's environment: the
    launcher finds ``python3`` in the golden AMI's venv, which has torch, not in /usr/bin."""
    env = unit_environment(UNIT_DIR / unit.UNIT)
    assert env["PATH"] == layout.WORKLOAD_PATH  # the PATH of a training job's unit too
    assert env["PATH"].split(":")[0] == f"{layout.WORKLOAD_VENV}/bin"
    venv_bin = tmp_path / "venv/bin"  # the venv, moved into the test folder
    venv_bin.mkdir(parents=True)
    out = tmp_path / "ran.json"
    (venv_bin / "python3").write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump([sys.argv[0], sys.argv[1:]], open({str(out)!r}, 'w'))\n"
    )
    (venv_bin / "python3").chmod(0o755)
    config = str(write(tmp_path, COMMAND | {"command": "python3 /opt/gpu-platform/examples/serve.py --port 8080"}))
    path = env["PATH"].replace(f"{layout.WORKLOAD_VENV}/bin", str(venv_bin))
    done = subprocess.run(
        [sys.executable, "-m", "serving.launch", "run", "--config", config],
        capture_output=True, text=True, timeout=60, check=False,
        env={**env, "PATH": path, "PYTHONPATH": str(NODE_DIR), "PORT": "8080"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == [
        str(venv_bin / "python3"),
        ["/opt/gpu-platform/examples/serve.py", "--port", "8080"],
    ]


def test_a_command_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    config = str(write(tmp_path, COMMAND | {"command": "/nonexistent/server --port 8080"}))
    done = node_module("serving.launch", "run", "--config", config)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("gpu-service: cannot start the server: [Errno 2]")


# ---------------------------------------------------------------------------------------------
# the health wait
# ---------------------------------------------------------------------------------------------


class Health(LoopbackServer):
    """Answers the health path with ``codes`` in turn (the last one from then on)."""

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code = fake.codes.pop(0) if len(fake.codes) > 1 else fake.codes[0]
                self.send_response(code if self.path == "/health" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


def port_of(server: LoopbackServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


def test_wait_returns_at_the_first_200() -> None:
    with Health(503, 503, 200) as server:
        done = node_module(
            "serving.wait", "--port", str(port_of(server)), "--path", "/health", "--timeout", "10", "--interval", "0.05"
        )
    assert done.returncode == 0, done.stdout
    assert f"http://127.0.0.1:{port_of(server)}/health answered 200 after" in done.stdout


def test_wait_gives_up_at_the_timeout_with_the_last_answer() -> None:
    with Health(500) as server:
        healthy, message = wait.wait(f"{server.url}/health", timeout=0.3, interval=0.05, state=None)
    assert not healthy
    assert message == f"{server.url}/health did not answer 200 within 0 s; last answer: HTTP 500"


def test_wait_stops_at_once_when_the_unit_failed() -> None:
    seen = iter(
        [{"ActiveState": "activating"}, {"ActiveState": "failed", "Result": "start-limit-hit", "NRestarts": "5"}]
    )
    with Health(503) as server:
        healthy, message = wait.wait(f"{server.url}/health", timeout=60, interval=0.01, state=lambda: next(seen))
    assert not healthy
    assert message.startswith("the service's unit failed (Result=start-limit-hit, restarts 5) after 0 s")
