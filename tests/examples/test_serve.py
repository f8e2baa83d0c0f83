"""examples/serve.py, the example service: the real HTTP server with a tiny model without torch (the torch
model runs on GPU machines). Health follows the model's state; predict runs the model; SIGTERM stops it."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.node.service_standin import EXAMPLES, TinyModel

# isort: split
import serve  # on sys.path through tests.node.service_standin

STANDIN = Path(__file__).resolve().parents[1] / "node" / "service_standin.py"


def request(port: int, method: str, path: str, body: object = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    response = conn.getresponse()
    payload = json.loads(response.read() or b"{}")
    conn.close()
    return response.status, payload


def until(check, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@dataclass
class Running:
    server: serve.ModelServer
    model: TinyModel
    thread: threading.Thread
    result: list[int]


@pytest.fixture
def running() -> Iterator[Running]:
    model = TinyModel("gated")
    server = serve.ModelServer(model, port=0, health_path="/healthz", host="127.0.0.1")
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(server.serve()), daemon=True)
    thread.start()
    yield Running(server, model, thread, result)
    model.gate.set()
    server.stop()
    thread.join(timeout=5)


def test_health_answers_503_while_the_model_loads_and_200_once_it_is_warm(running: Running) -> None:
    port = running.server.port
    assert request(port, "GET", "/healthz") == (503, {"status": "loading", "model": "tiny-sum-product"})
    assert request(port, "POST", "/predict", {"inputs": [[1, 2]]})[0] == 503
    running.model.gate.set()
    until(lambda: request(port, "GET", "/healthz")[0] == 200)
    assert request(port, "GET", "/healthz") == (200, {"status": "ready", "model": "tiny-sum-product"})
    assert running.model.calls == [[[1.0, 1.0]]]  # the warm-up pass ran before the first 200


def test_predict_runs_the_model_on_the_inputs(running: Running) -> None:
    running.model.gate.set()
    port = running.server.port
    until(lambda: request(port, "GET", "/healthz")[0] == 200)
    status, body = request(port, "POST", "/predict", {"inputs": [[2, 3], [0.5, 4]]})
    assert (status, body) == (200, {"outputs": [[5.0, 6.0], [4.5, 2.0]], "model": "tiny-sum-product"})
    assert running.model.calls[-1] == [[2.0, 3.0], [0.5, 4.0]]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"not json", "the body is not JSON"),
        ({"inputs": []}, 'give {"inputs": [[numbers], ...]} with 1 to 64 rows'),
        ({"inputs": [[1, "x"]]}, "each row of inputs must be a list of numbers"),
        ({"inputs": [[1, 2, 3]]}, "each row of inputs must have 2 numbers"),  # the model's own check
    ],
)
def test_a_bad_predict_body_is_a_400_naming_the_problem(running: Running, body: object, error: str) -> None:
    running.model.gate.set()
    until(lambda: running.server.state.snapshot()[0] == "ready")
    assert request(running.server.port, "POST", "/predict", body) == (400, {"error": error})


def test_other_paths_are_404(running: Running) -> None:
    assert request(running.server.port, "GET", "/health")[0] == 404  # the configured path only
    assert request(running.server.port, "POST", "/other", {"inputs": [[1, 2]]})[0] == 404


def test_a_model_that_fails_to_load_fails_health_and_ends_the_server_with_1() -> None:
    model = TinyModel("crash")
    server = serve.ModelServer(model, port=0, host="127.0.0.1")
    assert server.serve() == 1
    assert server.state.snapshot() == ("failed", "RuntimeError: CUDA error: out of memory (stand-in)")


def start_standin(*args: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, str(STANDIN), *args, "--port", "0", "--host", "127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    while line and "listening on port" not in line:  # the stand-in first names the serve.py it imports
        line = process.stdout.readline()
    assert "listening on port" in line, line
    return process, int(line.split("listening on port ")[1].split(";")[0])


def test_sigterm_stops_the_server_cleanly_with_exit_0() -> None:
    process, port = start_standin("--mode", "ready", "--health-path", "/health")
    try:
        until(lambda: request(port, "GET", "/health")[0] == 200)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        output = process.stdout.read() if process.stdout else ""
        assert "received SIGTERM" in output and "stopped (exit 0)" in output
        with pytest.raises(ConnectionRefusedError):
            request(port, "GET", "/health")
    finally:
        process.kill()
        process.wait()


def test_a_crashing_model_exits_1_on_its_own() -> None:
    process, _ = start_standin("--mode", "crash")
    try:
        assert process.wait(timeout=10) == 1
        assert "model failed: RuntimeError" in (process.stdout.read() if process.stdout else "")
    finally:
        process.kill()
        process.wait()


def test_a_port_in_use_is_one_line_not_a_traceback() -> None:
    process, port = start_standin("--mode", "ready")
    try:
        done = subprocess.run(
            [sys.executable, str(STANDIN), "--port", str(port), "--host", "127.0.0.1"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            f"serve.py: cannot listen on 127.0.0.1:{port}: Address already in use"
        ]
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_example_imports_no_torch_until_its_model_loads() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(EXAMPLES)!r}); import serve, serve_model; print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.strip() == "False"
