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

from tests.scripts.node.serving.service_standin import EXAMPLES, TinyModel

# isort: split
import serve  # on sys.path through tests.scripts.node.serving.service_standin

STANDIN = Path(__file__).resolve().parents[1] / "scripts" / "node" / "serving" / "service_standin.py"


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


def test_sigterm_with_an_idle_keep_alive_connection_open_exits_at_once() -> None:
    """The load balancer keeps connections to its targets open between requests (HTTP/1.1 keep-alive). A
    stop must not wait for such an idle connection: exit 0 within seconds, not at systemd's SIGKILL."""
    process, port = start_standin("--mode", "ready", "--health-path", "/health")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        until(lambda: request(port, "GET", "/health")[0] == 200)
        conn.request("GET", "/health")  # one request, then the connection stays open and idle
        response = conn.getresponse()
        assert (response.status, response.getheader("Connection")) == (200, None)  # kept alive
        response.read()
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
        output = process.stdout.read() if process.stdout else ""
        assert "stopped (exit 0)" in output
    finally:
        conn.close()
        process.kill()
        process.wait()


def test_a_request_in_flight_at_sigterm_is_answered(running: Running) -> None:
    """A stop closes idle connections only: a predict being computed still gets its answer."""
    running.model.gate.set()
    until(lambda: running.server.state.snapshot()[0] == "ready")
    slow = threading.Event()
    original = running.model.predict

    def predict(inputs: list[list[float]]) -> list[list[float]]:
        slow.set()
        time.sleep(0.5)
        return original(inputs)

    running.model.predict = predict  # type: ignore[method-assign]
    answer: list[tuple[int, dict]] = []
    client = threading.Thread(
        target=lambda: answer.append(request(running.server.port, "POST", "/predict", {"inputs": [[2, 3]]}))
    )
    client.start()
    assert slow.wait(5)
    running.server.stop()
    client.join(5)
    running.thread.join(5)
    assert answer == [(200, {"outputs": [[5.0, 6.0]], "model": "tiny-sum-product"})]
    assert running.result == [0]


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout() -> None:
    """Longer than the load balancer's idle timeout (60 s), so the balancer closes first; never forever."""
    assert serve.KEEP_ALIVE_TIMEOUT_S > 60
    server = serve.ModelServer(TinyModel("ready"), port=0, host="127.0.0.1", keep_alive_timeout_s=0.5)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        until(lambda: server.state.snapshot()[0] == "ready")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/health")
        conn.getresponse().read()
        conn.sock.settimeout(5)
        assert conn.sock.recv(1) == b""  # the server closed the idle connection
        conn.close()
    finally:
        server.stop()
        thread.join(5)


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
