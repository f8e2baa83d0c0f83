"""Shared by the node-service tests: import paths, fixtures on disk, and a fake IMDSv2 server.

The node services import each other as top-level modules (on the instance they run from one
folder, /opt/gpu-platform/node), so the tests put scripts/node on sys.path the same way.
"""

from __future__ import annotations

import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import boto3
import pytest
from moto import mock_aws

ROOT = Path(__file__).resolve().parents[3]
NODE_DIR = ROOT / "scripts" / "node"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

if str(NODE_DIR) not in sys.path:
    sys.path.insert(0, str(NODE_DIR))

TOKEN_PATH = "/latest/api/token"  # noqa: S105 - a URL path, not a secret
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"  # noqa: S105 - a header name


class LoopbackServer:
    """An HTTP server of the test's own on 127.0.0.1 (ephemeral port), in a daemon thread.

    Subclasses give ``_handler_class()``; ``with Sub(...) as server:`` starts and stops it.
    """

    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeImds(LoopbackServer):
    """IMDSv2 on 127.0.0.1 (ephemeral port): PUT a token, GET with it; 401 for a missing or
    expired token, 404 for a path that was not set. Counts what it answered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: set[str] = set()
        self._paths: dict[str, str] = {}
        self.token_puts = 0
        self.ttl_headers: list[str] = []
        self.unauthorized = 0
        self.gets: list[tuple[str, int]] = []

    # -- control from the test --

    def set(self, path: str, body: str) -> None:
        with self._lock:
            self._paths[path] = body

    def clear(self, path: str) -> None:
        with self._lock:
            self._paths.pop(path, None)

    def expire_tokens(self) -> None:
        with self._lock:
            self._tokens.clear()

    # -- request handling --

    def _put(self, path: str, ttl: str | None) -> tuple[int, str]:
        if path != TOKEN_PATH:
            return 404, ""
        if ttl is None or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return 400, ""
        with self._lock:
            token = uuid.uuid4().hex
            self._tokens.add(token)
            self.token_puts += 1
            self.ttl_headers.append(ttl)
        return 200, token

    def _get(self, path: str, token: str | None) -> tuple[int, str]:
        with self._lock:
            if token not in self._tokens:
                self.unauthorized += 1
                status, body = 401, ""
            elif path in self._paths:
                status, body = 200, self._paths[path]
            else:
                status, body = 404, ""
            self.gets.append((path, status))
        return status, body

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:
                self._reply(*fake._put(self.path, self.headers.get(TTL_HEADER)))

            def do_GET(self) -> None:
                self._reply(*fake._get(self.path, self.headers.get(TOKEN_HEADER)))

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


UNIT_DIR = NODE_DIR / "systemd"


def read_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file as section -> key -> values (in file order; comments and blanks dropped)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not a key=value line: {line}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def unit_output_file(path: Path) -> str | None:
    """The file a unit appends its stdout to (``StandardOutput=append:<file>``), if any."""
    service = read_unit(path).get("Service", {})
    (output,) = service.get("StandardOutput", ["journal"])
    return output.removeprefix("append:") if output.startswith("append:") else None


@contextmanager
def moto_account(region: str, template_name: str, instance_type: str) -> Iterator[None]:
    """A moto world with test credentials and one launch template, for groups the node scripts act on."""
    with pytest.MonkeyPatch.context() as patch:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            patch.setenv(key, "testing")
        patch.setenv("AWS_DEFAULT_REGION", region)
        with mock_aws():
            boto3.client("ec2", region_name=region).create_launch_template(
                LaunchTemplateName=template_name,
                LaunchTemplateData={"ImageId": "ami-0123456789abcdef0", "InstanceType": instance_type},
            )
            yield


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
