"""The example service of an inference fleet: a small HTTP model server, the template to replace.

``python3 /opt/gpu-platform/examples/serve.py --port 8080`` (dev's inference fleet runs exactly that):

- ``GET <health path>`` (``--health-path``, ``/health``): 200 ``{"status": "ready", ...}`` once the model is
  built on the GPU and a warm-up forward pass succeeded; 503 ``{"status": "loading"}`` before, 503
  ``{"status": "failed", "error": ...}`` if that failed (the process then exits 1, so systemd restarts it).
  The node's bootstrap and the load balancer's target group both check this path.
- ``POST /predict`` with ``{"inputs": [[x, ...], ...]}`` (one row per example, ``--input-width`` numbers
  each, up to 64 rows): 200 ``{"outputs": [[y, ...], ...], "model": ...}``; 400 on a bad body; 503 until
  ready.
- SIGTERM (systemd's stop, the group's scale-in after deregistration) or SIGINT: stops taking
  connections, finishes the requests in flight (their answers say ``Connection: close``), closes the idle
  keep-alive connections at once, exits 0.
- Keep-alive: a connection idle for ``KEEP_ALIVE_TIMEOUT_S`` (65 s) is closed, longer than the load
  balancer's idle timeout (60 s by default), so that the load balancer, not the server, closes idle ones.

The HTTP side here is the standard library and has no torch in it; the model (``serve_model.TorchMlp``)
is built at start from a fixed seed (nothing downloaded). To serve a real model, replace the whole
command in the fleet's ``service:`` with vLLM (``vllm serve <model> --port 8080``, health ``/health``),
TorchServe (its inference API answers ``/ping``) or Triton (``/v2/health/ready``), or keep this server and
give it another object with the same ``load`` / ``example_input`` / ``predict`` methods.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, Protocol

MAX_BODY_BYTES = 1 << 20
MAX_BATCH = 64
KEEP_ALIVE_TIMEOUT_S = 65.0
#: The node's service port is reached through the load balancer, so the server listens on every interface.
ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - on purpose (above)  # nosec B104


class Model(Protocol):
    name: str

    def load(self) -> None: ...

    def example_input(self) -> list[list[float]]: ...

    def predict(self, inputs: list[list[float]]) -> list[list[float]]: ...


def log(message: str) -> None:
    print(f"serve: {message}", flush=True)


class ModelState:
    """``loading`` -> ``ready`` | ``failed``; the health check answers 200 only in ``ready``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.status = "loading"
        self.error: str | None = None

    def set(self, status: str, error: str | None = None) -> None:
        with self._lock:
            self.status, self.error = status, error

    def snapshot(self) -> tuple[str, str | None]:
        with self._lock:
            return self.status, self.error


def parse_inputs(body: bytes) -> list[list[float]]:
    """The ``inputs`` of a predict request; ValueError with what is wrong."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError("the body is not JSON") from None
    inputs = data.get("inputs") if isinstance(data, dict) else None
    if not isinstance(inputs, list) or not 1 <= len(inputs) <= MAX_BATCH:
        raise ValueError(f'give {{"inputs": [[numbers], ...]}} with 1 to {MAX_BATCH} rows')
    for row in inputs:
        if not isinstance(row, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in row):
            raise ValueError("each row of inputs must be a list of numbers")
    return [[float(x) for x in row] for row in inputs]


class ModelServer:
    """The model behind ``GET <health_path>`` and ``POST /predict`` on a threading HTTP server."""

    def __init__(
        self,
        model: Model,
        *,
        port: int,
        health_path: str = "/health",
        host: str = ALL_INTERFACES,
        keep_alive_timeout_s: float = KEEP_ALIVE_TIMEOUT_S,
    ) -> None:
        self.model = model
        self.keep_alive_timeout_s = keep_alive_timeout_s
        self._connections_lock = threading.Lock()
        self._idle: set[socket.socket] = set()  # connections waiting for their next request
        self.health_path = health_path
        self.state = ModelState()
        self._predict_lock = threading.Lock()  # one forward pass at a time on the GPU
        self._stopped = threading.Event()
        self.exit_code = 0
        self.httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self.httpd.daemon_threads = False  # requests in flight finish before exit
        self.httpd.block_on_close = True

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def load(self) -> None:
        try:
            log(f"building {self.model.name}")
            self.model.load()
            self.model.predict(self.model.example_input())  # warm-up: kernels compiled, memory allocated
        except Exception as err:  # any failure of the model is reported, then the process exits
            self.state.set("failed", f"{type(err).__name__}: {err}")
            log(f"model failed: {type(err).__name__}: {err}")
            self.stop(1)
            return
        self.state.set("ready")
        log(f"{self.model.name} ready: {self.health_path} answers 200")

    def predict(self, inputs: list[list[float]]) -> list[list[float]]:
        with self._predict_lock:
            return self.model.predict(inputs)

    def stop(self, code: int = 0) -> None:
        self.exit_code = self.exit_code or code
        self._stopped.set()

    @property
    def stopping(self) -> bool:
        return self._stopped.is_set()

    def _mark(self, connection: socket.socket, *, idle: bool) -> None:
        """A connection waits for a request (idle) or serves one; an idle one is closed once stopping."""
        with self._connections_lock:
            if not idle:
                self._idle.discard(connection)
                return
            self._idle.add(connection)
            if self.stopping:
                _end_reading(connection)

    def _close_idle(self) -> None:
        with self._connections_lock:
            for connection in self._idle:
                _end_reading(connection)

    def serve(self) -> int:
        """Serve until ``stop``; returns the exit code (0, or 1 when the model failed)."""
        server = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        server.start()
        log(f"listening on port {self.port}; {self.health_path} answers 503 until the model is ready")
        threading.Thread(target=self.load, daemon=True).start()
        self._stopped.wait()
        self.httpd.shutdown()  # no new connections
        self._close_idle()  # kept-alive connections between requests: nothing to finish
        self.httpd.server_close()  # waits for the requests in flight
        log(f"stopped (exit {self.exit_code})")
        return self.exit_code

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        model_server = self

        class Handler(_ModelHandler):
            app = model_server
            timeout = model_server.keep_alive_timeout_s  # a read waits that long at most (then the connection ends)

        return Handler


class _ModelHandler(BaseHTTPRequestHandler):
    """One connection to ``app`` (a ``ModelServer``): the health check and predictions, kept alive (HTTP/1.1)."""

    app: ModelServer
    protocol_version = "HTTP/1.1"

    def handle_one_request(self) -> None:
        self.app._mark(self.connection, idle=True)  # until the request line arrives
        super().handle_one_request()

    def parse_request(self) -> bool:
        self.app._mark(self.connection, idle=False)
        return super().parse_request()

    def finish(self) -> None:
        self.app._mark(self.connection, idle=False)
        super().finish()

    def _reply(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.app.stopping:
            self.send_header("Connection", "close")  # the last answer on this connection
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        app = self.app
        if self.path.split("?", 1)[0] != app.health_path:
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no {self.path}"})
            return
        status, error = app.state.snapshot()
        body: dict[str, Any] = {"status": status, "model": app.model.name}
        if error:
            body["error"] = error
        self._reply(HTTPStatus.OK if status == "ready" else HTTPStatus.SERVICE_UNAVAILABLE, body)

    def do_POST(self) -> None:
        app = self.app
        if self.path != "/predict":
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no {self.path}"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY_BYTES:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"a JSON body of 1 to {MAX_BODY_BYTES} bytes"})
            return
        body = self.rfile.read(length)
        if app.state.snapshot()[0] != "ready":
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "the model is not ready"})
            return
        try:
            outputs = app.predict(parse_inputs(body))
        except ValueError as err:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": str(err)})
            return
        self._reply(HTTPStatus.OK, {"outputs": outputs, "model": app.model.name})

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request would drown the service log; the load balancer logs requests


def _end_reading(connection: socket.socket) -> None:
    """A blocked read of ``connection`` returns end-of-file; an answer can still be written."""
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RD)


def install_stop_handlers(server: ModelServer) -> None:
    def _stop(signum: int, _frame: FrameType | None) -> None:
        log(f"received {signal.Signals(signum).name}")
        server.stop(0)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--health-path", default="/health")
    parser.add_argument("--host", default=ALL_INTERFACES, help="address to listen on (all: the load balancer's)")
    parser.add_argument("--device", default="cuda", help="torch device of the model (cuda, cuda:1, cpu)")
    parser.add_argument("--input-width", type=int, default=64, help="numbers per input row")
    return parser


def run(model: Model, argv: list[str] | None = None) -> int:
    """Serve ``model`` with the command line's port, health path and host."""
    args = build_parser().parse_args(argv)
    if not args.health_path.startswith("/"):
        print(f"serve.py: --health-path must start with /, got {args.health_path!r}", file=sys.stderr)
        return 2
    try:
        server = ModelServer(model, port=args.port, health_path=args.health_path, host=args.host)
    except OSError as err:
        print(f"serve.py: cannot listen on {args.host}:{args.port}: {err.strerror}", file=sys.stderr)
        return 1
    install_stop_handlers(server)
    return server.serve()


def main(argv: list[str] | None = None) -> int:
    args, _ = build_parser().parse_known_args(argv)
    from serve_model import TorchMlp  # torch is imported by the model only, when it loads

    return run(TorchMlp(device=args.device, input_width=args.input_width), argv)


if __name__ == "__main__":
    sys.exit(main())
