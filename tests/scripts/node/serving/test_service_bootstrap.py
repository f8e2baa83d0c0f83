"""The served node: bootstrap.sh's service step, end to end. The real bootstrap, the real launcher
(serving.launch, started as gpu-service.service's ExecStart by the fake systemctl), the real example server
(examples/serve.py with a tiny model, tests/scripts/node/serving/service_standin.py), the real health wait, and the launch
hook on the moto-backed endpoint: CONTINUE only once the service answers 200, else ABANDON."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripts.node.fake_aws import FakeAws
from tests.scripts.node.fake_node import (
    STEPS,
    Node,
    Result,
    assert_abandoned,
    lifecycle_call,
    new_node,
    stop_service,
)
from tests.scripts.node.helpers import FakeImds, free_port

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import layout

STANDIN = Path(__file__).resolve().parent / "service_standin.py"


@pytest.fixture
def served(tmp_path: Path, shared_aws: FakeAws) -> Iterator[Node]:
    """A p4d node that passes every step before the service one (tests/scripts/node/fake_node.py; ``shared_aws``: conftest.py)."""
    shared_aws.reset()
    with FakeImds() as imds:
        yield new_node(tmp_path, shared_aws, imds)
    stop_service(tmp_path)


def serve(served: Node, *, command: str | None = None, mode: str = "ready", timeout: int = 20, **extra: object) -> int:
    """Writes service.json as the user data does, for the stand-in server in ``mode``; returns its port."""
    port = free_port()
    command = command or f"{sys.executable} {STANDIN} --mode {mode} --port {port} --health-path /ready --host 127.0.0.1"
    settings = {"port": port, "health_check_path": "/ready", "command": command, "image": None}
    settings |= {"start_timeout_seconds": timeout, **extra}
    served.path("SERVICE_FILE").write_text(json.dumps(settings))
    return port


def drop_in(served: Node) -> str:
    return (served.path("SYSTEMD_UNIT_DIR") / "gpu-service.service.d" / "50-service.conf").read_text()


def test_a_served_node_continues_once_its_service_answers_200(served: Node) -> None:
    port = serve(served, mode="slow")  # 503 for a second while the model loads, then 200
    started = time.monotonic()
    result = served.run()

    assert result.returncode == 0, result.stderr + result.log
    assert result.steps("ok") == STEPS
    assert served.aws.calls == [lifecycle_call(served, "CONTINUE")]
    assert served.fleet.state == "InService"
    assert time.monotonic() - started >= 1  # it waited for the model
    # After every other step: the drop-in, a reload, then the unit, whose ExecStartPre (as root) made CUDA's
    # device files; the wait asked systemd about it.
    show = "systemctl show --property=ActiveState,SubState,Result,NRestarts"
    services_done = max(i for i, call in enumerate(result.calls) if call == f"{show} spot-watcher.service")
    after = result.calls[services_done + 1 :]
    assert after[:3] == [
        "systemctl daemon-reload",
        "systemctl enable --now gpu-service.service",
        "nvidia-modprobe --unified-memory --create-nvidia-device-file=0",
    ]
    assert set(after[3:]) == {f"{show} gpu-service.service"}
    assert f"http://127.0.0.1:{port}/ready answered 200 after" in result.log
    assert f"service (command) on port {port}, health check /ready, start timeout 20 s" in result.log
    unit = drop_in(served)
    assert "DynamicUser=yes" in unit and "User=gpu-service" in unit and f"Environment=PORT={port}" in unit
    # The server's own lines went to the service log (the file the agent ships), after the device files.
    service_log = served.units.log(layout.SERVICE_LOG).read_text()
    assert "gpu-service: starting " in service_log and "tiny-sum-product ready" in service_log
    assert service_log.index("/dev/nvidia-uvm-tools ready") < service_log.index("gpu-service: starting ")


def answer_after_failure(result: Result) -> str:
    (line,) = [line for line in result.log.splitlines() if "/ready" in line and "within" in line]
    return line


@pytest.mark.slow  # waits out an 8 s start timeout
def test_a_service_that_answers_503_until_the_timeout_abandons(served: Node) -> None:
    port = serve(served, mode="never", timeout=8)  # the stand-in listens within seconds, even on a busy machine
    result = served.run()

    assert_abandoned(served, result, "service")
    # Within what is left of the 8 s after the start (the step's one budget).
    assert re.search(
        rf"http://127.0.0.1:{port}/ready did not answer 200 within [78] s; last answer: HTTP 503", result.log
    )
    # The reason is in the bootstrap log: the service log's last lines and the unit's status.
    assert "the last lines of" in result.log and "listening on port" in result.log
    assert "systemctl status --no-pager --lines=0 gpu-service.service" in result.calls


def test_a_service_that_never_listens_abandons(served: Node) -> None:
    serve(served, command="sleep 30", timeout=2)
    result = served.run()

    assert_abandoned(served, result, "service")
    assert "last answer: no answer (" in answer_after_failure(result)
    assert "Connection refused" in answer_after_failure(result)


def test_a_service_whose_unit_fails_abandons_without_waiting_out_the_timeout(served: Node) -> None:
    serve(served, mode="crash", timeout=60)
    started = time.monotonic()
    result = served.run()

    assert_abandoned(served, result, "service")
    assert time.monotonic() - started < 30
    assert "the service's unit failed (Result=exit-code, restarts 4)" in result.log
    assert "model failed: RuntimeError: CUDA error: out of memory (stand-in)" in result.log  # from service.log


def test_a_service_whose_cuda_device_files_cannot_be_made_abandons_before_the_server_runs(served: Node) -> None:
    serve(served, mode="ready")
    served.env["FAKE_NVIDIA_MODPROBE_FAIL"] = "1"  # e.g. nvidia-uvm does not load for this kernel
    result = served.run()

    assert_abandoned(served, result, "service")
    assert "Job for gpu-service.service failed because the control process exited with error code." in result.log
    # ExecStartPre's own line, from service.log: what failed and the fix.
    assert (
        "gpu-service: cannot create /dev/nvidia-uvm and /dev/nvidia-uvm-tools "
        f"({served.tmp / 'bin' / 'nvidia-modprobe'} --unified-memory --create-nvidia-device-file=0: exit 1); "
        "fix: the image needs the NVIDIA driver's nvidia-uvm module and nvidia-modprobe"
    ) in result.log
    assert "gpu-service: starting" not in served.units.log(layout.SERVICE_LOG).read_text()  # the server never ran
    assert not any(call.startswith("systemctl show") and "gpu-service" in call for call in result.calls)  # no wait


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        (
            {"port": 8080, "health_check_path": "/h", "command": "x", "image": "y"},
            "give exactly one of command and image",
        ),
        ({"port": 80, "health_check_path": "/h", "command": "x"}, "port must be a whole number from 1024 to 65535"),
        ({"port": 8080, "health_check_path": "h", "command": "x"}, "health_check_path must be a URL path"),
    ],
)
def test_a_bad_service_file_abandons_with_one_line(served: Node, settings: dict, line: str) -> None:
    served.path("SERVICE_FILE").write_text(json.dumps(settings))
    result = served.run()

    assert_abandoned(served, result, "service")
    assert f"{served.path('SERVICE_FILE')}: {line}" in result.log
    assert "systemctl enable --now gpu-service.service" not in result.calls


def test_a_fleet_without_a_service_file_starts_no_service(served: Node) -> None:
    result = served.run()

    assert result.returncode == 0, result.stderr
    assert "this fleet serves nothing" in result.log
    assert not any("gpu-service" in call for call in result.calls)
    assert not (served.path("SYSTEMD_UNIT_DIR") / "gpu-service.service.d").exists()
    assert served.aws.calls == [lifecycle_call(served, "CONTINUE")]
