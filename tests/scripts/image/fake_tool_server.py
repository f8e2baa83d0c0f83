"""The fake parent's tools (fake_tools.py, fake_devices.py) served by one long-lived process.

A component's steps call about 140 fake tools per parent; started as a Python program each, every call cost an
interpreter start (about 25 ms on 2 cores). Here one process per test process listens on 127.0.0.1 and forks a child
per call, which imports the tool modules (so ``FAKE_STATE`` and ``GPU_PLATFORM_ROOT`` are read afresh, as a fresh
process would), changes to the caller's folder, runs the tool and answers. The tool on PATH is a bash script
(``wrapper``) that sends its call over bash's /dev/tcp and prints the answer: a few milliseconds.

The exchange, each field ending in NUL: the caller sends the tool, its folder, ``FAKE_STATE`` and ``GPU_PLATFORM_ROOT``
(``=`` and the value, or nothing where unset), stdin (empty unless the tool reads it: ``READS_STDIN``), the count of
arguments and the arguments; the answer is the
exit status, then (stream, text) pairs in the order the tool wrote them (1 stdout, 2 stderr), then the connection
closes. The server ends with the test process that started it (it watches its parent).
"""

from __future__ import annotations

import contextlib
import fnmatch  # noqa: F401 - loaded once here, for the children the tools run in
import functools  # noqa: F401
import gzip  # noqa: F401
import hashlib  # noqa: F401
import io
import json  # noqa: F401
import os
import re  # noqa: F401
import select
import socket
import sys
import tarfile  # noqa: F401
import traceback
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The tools that read their standard input (gpg's key from ``curl | gpg``, ``linux-version sort``).
READS_STDIN = frozenset({"gpg", "linux-version"})
#: The tool modules, in import order (fake_devices and fake_downloads import fake_tools).
MODULES = ("fake_tools", "fake_devices", "fake_downloads")


def wrapper(tool: str, port: int) -> str:
    """The bash script on PATH that runs ``tool`` in the server listening on ``port``."""
    stdin = 'IFS= read -r -d "" input || true' if tool in READS_STDIN else "input="
    return f"""#!/bin/bash
exec 3<>/dev/tcp/127.0.0.1/{port} || exit 125
{stdin}
printf '%s\\0' {tool} "$PWD" "${{FAKE_STATE+=}}${{FAKE_STATE-}}" "${{GPU_PLATFORM_ROOT+=}}${{GPU_PLATFORM_ROOT-}}" \\
  "$input" "$#" "$@" >&3
IFS= read -r -d "" rc <&3
while IFS= read -r -d "" stream && IFS= read -r -d "" text; do
  printf '%s' "$text" >&"$stream"
done <&3
exit "$rc"
"""


class _Stream(io.TextIOBase):
    """sys.stdout or sys.stderr of a child: what is written goes to ``events`` with the stream's number."""

    def __init__(self, number: int, events: list[tuple[int, str]]) -> None:
        self.number, self.events = number, events

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.events and self.events[-1][0] == self.number:
            self.events[-1] = (self.number, self.events[-1][1] + text)
        else:
            self.events.append((self.number, text))
        return len(text)


#: The tool modules' code, compiled once: each child runs it afresh, as a new process importing them would.
CODE = {name: compile((HERE / f"{name}.py").read_text(), str(HERE / f"{name}.py"), "exec") for name in MODULES}


def _load(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(HERE / f"{name}.py")
    sys.modules[name] = module
    exec(CODE[name], module.__dict__)  # noqa: S102 - the test's own fake tools
    return module


def _read_call(connection: socket.socket) -> list[str]:
    data = b""
    fields: list[bytes] = []
    while len(fields) < 6 or len(fields) < 6 + int(fields[5]):
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the caller hung up mid-call")
        data += chunk
        fields = data.split(b"\0")[:-1]
    return [field.decode() for field in fields]


def _run(connection: socket.socket) -> None:
    """In the child: one call, answered."""
    tool, folder, state, root, stdin, _count, *args = _read_call(connection)
    for name, value in (("FAKE_STATE", state), ("GPU_PLATFORM_ROOT", root)):
        if value.startswith("="):  # set, maybe empty
            os.environ[name] = value[1:]
        else:
            os.environ.pop(name, None)
    os.chdir(folder)
    events: list[tuple[int, str]] = []
    sys.stdin = io.StringIO(stdin)
    sys.stdout, sys.stderr = _Stream(1, events), _Stream(2, events)
    try:
        fake_tools = _load("fake_tools")
        _load("fake_devices")
        _load("fake_downloads")
        code = fake_tools.tools()[tool](args)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # the traceback to the caller's stderr, as a crashed program's
        traceback.print_exc()
        code = 1
    answer = f"{code}\0" + "".join(f"{number}\0{text}\0" for number, text in events)
    connection.sendall(answer.encode())


def serve(listener: socket.socket, parent: int) -> None:
    while os.getppid() == parent:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:  # the calls answered meanwhile
                pass
        if not select.select([listener], [], [], 1.0)[0]:
            continue
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            code = 0
            try:
                _run(connection)
            except BaseException:  # a broken call must not leave a second server running
                code = 1
            finally:
                with contextlib.suppress(OSError):
                    connection.close()
                os._exit(code)
        connection.close()


def main() -> None:
    """``fake_tool_server.py``: listens on an ephemeral port of 127.0.0.1, prints it, serves until its parent ends."""
    parent = os.getppid()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    serve(listener, parent)


if __name__ == "__main__":
    main()
