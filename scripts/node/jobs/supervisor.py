"""The main process of a job's unit: runs torchrun, owns the job's pid file, passes the checkpoint request
on to the training processes, keeps the job's output, and exits with torchrun's exit status.

- **Pid file** (the checkpoint contract): ``<TRAINING_PID_DIR>/<job>.pid`` holds the supervisor's own pid,
  written (temporary file, then rename) once its SIGUSR1 handler is installed, removed at the end.
- **SIGUSR1** (from the checkpoint hook) goes to torchrun's children, the training workers, never to torchrun
  itself: torchrun does not handle SIGUSR1, whose default action would end it and with it the job.
- **SIGTERM / SIGINT** (``systemctl stop``, a shutdown) go to torchrun, which stops its workers. One that
  arrives before torchrun is started means the job does not start (exit 128 + the signal); one that arrives
  while it is being started stops it as soon as it runs.
- **Output**: torchrun's stdout and stderr, line by line, to ``<JOB_LOG_DIR>/<job>.log`` first, then to the
  CloudWatch Logs stream ``<job>/<instance-id>`` of ``/gpu-platform/<env>/jobs`` (logship.LogShipper).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import IO, Any

from jobs.logship import LogShipper

SHIP_CLOSE_TIMEOUT_S = 15.0
"""How long the supervisor waits, at the end, for the last lines to reach CloudWatch Logs."""


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def children_of(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """Pids whose parent is ``pid`` (from /proc/<pid>/stat; the command name may hold spaces and ')')."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return sorted(found)


def write_pid_file(pid_file: Path) -> None:
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    temporary = pid_file.parent / f".{pid_file.name}.{os.getpid()}"
    temporary.write_text(f"{os.getpid()}\n")
    os.replace(temporary, pid_file)


class JobOutput:
    """The local file (always) and the shipper (when there is one) of the job's lines."""

    def __init__(self, path: Path, shipper: LogShipper | None) -> None:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        self._file: IO[str] = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in close()
        os.chmod(path, 0o644)
        self._lock = threading.Lock()
        self.shipper = shipper

    def line(self, text: str) -> None:
        """From any thread, never from a signal handler (the file and the shipper take locks)."""
        text = text.rstrip("\n")
        with self._lock:
            self._file.write(text + "\n")
            self._file.flush()
        if self.shipper is not None:
            self.shipper.put(text)

    def note(self, text: str) -> None:
        """A line of the supervisor's own, local file only (e.g. about shipping itself)."""
        with self._lock:
            self._file.write(f"gpu-job: {text}\n")
            self._file.flush()

    def close(self) -> None:
        if self.shipper is not None and not self.shipper.close(SHIP_CLOSE_TIMEOUT_S):
            self.note("some lines were not shipped to CloudWatch Logs before the end; they are in this file")
        self._file.close()


class Supervisor:
    def __init__(
        self,
        job: str,
        argv: list[str],
        *,
        workdir: str,
        env: dict[str, str],
        pid_file: Path,
        output: JobOutput,
        on_started: Callable[[], None] = lambda: None,
    ) -> None:
        self.job = job
        self.argv = argv
        self.workdir = workdir
        self.env = env
        self.pid_file = pid_file
        self.output = output
        self.on_started = on_started
        self.torchrun: subprocess.Popen[bytes] | None = None
        self._stop_signal: int | None = None
        """The first SIGTERM / SIGINT, whenever it came (even before torchrun existed)."""
        self._stop_sent = threading.Lock()
        """Taken by whoever passes the stop on to torchrun (the handler, or the start just after Popen):
        once. A non-blocking acquire is one step that a signal handler cannot run in the middle of."""
        # Signal handlers only queue their lines (SimpleQueue.put is safe in a handler); a thread writes them.
        self._said: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._relay = threading.Thread(target=self._write_said, name="supervisor-lines", daemon=True)

    def say(self, text: str) -> None:
        self._said.put(f"gpu-job: {text}")

    def _write_said(self) -> None:
        while (text := self._said.get()) is not None:
            self.output.line(text)

    # -- signals -------------------------------------------------------------------------------

    def _checkpoint_request(self, _signum: int, _frame: FrameType | None) -> None:
        if self.torchrun is None or self.torchrun.poll() is not None:
            self.say("SIGUSR1 received: torchrun is not running")
            return
        workers = children_of(self.torchrun.pid)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
        self.say(f"SIGUSR1 received: passed on to the workers {workers or '(none started yet)'}")

    def _stop(self, signum: int, _frame: FrameType | None) -> None:
        self._stop_signal = self._stop_signal or signum
        if self.torchrun is None:
            self.say(f"{signal.Signals(signum).name} received before torchrun started")
        self._pass_stop_on()

    def _pass_stop_on(self) -> None:
        torchrun = self.torchrun
        if self._stop_signal is None or torchrun is None or torchrun.poll() is not None:
            return
        if self._stop_sent.acquire(blocking=False):
            self.say(f"{signal.Signals(self._stop_signal).name} received: stopping torchrun (pid {torchrun.pid})")
            torchrun.send_signal(signal.SIGTERM)

    def _start_torchrun(self) -> subprocess.Popen[bytes]:
        torchrun = subprocess.Popen(
            self.argv,
            cwd=self.workdir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.torchrun = torchrun
        self._pass_stop_on()  # a stop that came while Popen ran found no torchrun to signal
        return torchrun

    # -- run -----------------------------------------------------------------------------------

    def run(self) -> int:
        self._relay.start()
        try:
            return self._run()
        finally:
            self._said.put(None)
            self._relay.join(5)

    def _run(self) -> int:
        signal.signal(signal.SIGUSR1, self._checkpoint_request)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        if self._stop_signal is not None:
            self.say("the job is not started")
            return 128 + self._stop_signal
        self.say(f"starting job {self.job} in {self.workdir}: {' '.join(self.argv)}")
        try:
            torchrun = self._start_torchrun()
        except OSError as err:
            where = "" if "/" in self.argv[0] else f" (PATH {self.env.get('PATH', '')})"
            self.say(f"cannot start {self.argv[0]}{where}: {err}")
            return 127
        write_pid_file(self.pid_file)
        self.on_started()
        try:
            assert torchrun.stdout is not None
            for raw in torchrun.stdout:
                self.output.line(raw.decode("utf-8", errors="replace"))
            returncode = torchrun.wait()
        finally:
            self.pid_file.unlink(missing_ok=True)
        status = returncode if returncode >= 0 else 128 - returncode
        self.say(f"torchrun exited with status {status}")
        return status


def child_environment(environ: dict[str, str], node_dir: str) -> dict[str, str]:
    """The job's environment: the unit's, less the node scripts' folder on PYTHONPATH (the supervisor's own)."""
    env = dict(environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(":") if p and p != node_dir]
    if paths:
        env["PYTHONPATH"] = ":".join(paths)
    else:
        env.pop("PYTHONPATH", None)
    return env


def cloudwatch_client_factory(region: str) -> Callable[[], Any]:
    """A boto3 CloudWatch Logs client for ``region``, made on first use (in the shipping thread)."""

    def make() -> Any:
        import boto3
        from botocore.config import Config

        config = Config(connect_timeout=5, read_timeout=15, retries={"mode": "standard", "max_attempts": 3})
        return boto3.client("logs", region_name=region, config=config)

    return make


def fail(message: str) -> int:
    print(f"jobs.runner: {message}", file=sys.stderr)
    return 1
