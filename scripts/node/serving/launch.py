"""What gpu-service.service runs: ``prepare`` (ExecStartPre, as root), ``run`` (ExecStart) and ``cleanup``
(ExecStopPost, as root), each reading service.json.

- both modes: ``prepare`` first loads CUDA's unified memory module and creates its device files
  (``nvidia-modprobe --unified-memory --create-nvidia-device-file=0``: /dev/nvidia-uvm and /dev/nvidia-uvm-tools,
  minors 0 and 1). CUDA would run the setuid nvidia-modprobe itself on first use, but a command runs under
  ``NoNewPrivileges=`` (serving/unit.py), where setuid does nothing: after a fresh boot the model would find no
  GPU. A failure fails the start (exit 1, one line naming the fix).
- ``command`` mode: ``run`` replaces itself (exec) with the command, split like a shell would split it
  (``shlex``; no shell runs it), as the unit's unprivileged user; ``cleanup`` does nothing.
- ``image`` mode: ``prepare`` removes a container left by an earlier run and pulls the image (retried);
  ``run`` replaces itself with ``docker run --rm --name gpu-service --runtime nvidia --gpus all --publish
  PORT:PORT --env PORT=PORT --pull never IMAGE`` in the foreground, so the container's output goes to the
  unit's log and systemd's stop (SIGTERM) reaches it; ``cleanup`` removes the container if a stop that
  timed out left it running. Restarts are systemd's (``Restart=on-failure``), not docker's.

Exit 2: bad arguments or service.json (one line on stderr); 1: the device files or the pull failed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from serving.settings import SERVICE_FILE, ServiceSettings, SettingsError, load

CONTAINER_NAME = "gpu-service"
DOCKER = "/usr/bin/docker"
PULL_ATTEMPTS = 3
NVIDIA_MODPROBE = "/usr/bin/nvidia-modprobe"
UVM_FLAGS = ("--unified-memory", "--create-nvidia-device-file=0")
"""nvidia-modprobe -u -c 0: load nvidia-uvm, create /dev/nvidia-uvm (minor 0) and /dev/nvidia-uvm-tools (minor 1)."""
UVM_DEVICES = "/dev/nvidia-uvm and /dev/nvidia-uvm-tools"
UVM_TIMEOUT_S = 60


def command_argv(settings: ServiceSettings) -> list[str]:
    assert settings.command is not None
    argv = shlex.split(settings.command)
    if not argv:
        raise SettingsError("service.json: command is blank; fix: give the server's command line")
    return argv


def docker_run_argv(settings: ServiceSettings, docker: str = DOCKER) -> list[str]:
    assert settings.image is not None
    port = str(settings.port)
    return [
        docker, "run", "--rm", "--name", CONTAINER_NAME,
        "--runtime", "nvidia", "--gpus", "all",
        "--publish", f"{port}:{port}", "--env", f"PORT={port}",
        "--pull", "never", settings.image,
    ]  # fmt: skip


def service_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment the server gets: the unit's, without the node scripts' import path."""
    return {key: value for key, value in environ.items() if key != "PYTHONPATH"}


def create_uvm_devices(nvidia_modprobe: str) -> int:
    """As root: nvidia-uvm loaded and its device files created, so that CUDA in the service sees the GPUs."""
    argv = [nvidia_modprobe, *UVM_FLAGS]
    try:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=UVM_TIMEOUT_S)
        why = "" if done.returncode == 0 else f"exit {done.returncode}: {(done.stderr or done.stdout).strip()}"
    except FileNotFoundError:
        why = "not found"
    except subprocess.TimeoutExpired:
        why = f"no answer in {UVM_TIMEOUT_S} s"
    if why:
        print(
            f"gpu-service: cannot create {UVM_DEVICES} ({shlex.join(argv)}: {why.rstrip(': ')}); fix: the image needs "
            "the NVIDIA driver's nvidia-uvm module and nvidia-modprobe (`modprobe nvidia-uvm` says why it fails)",
            file=sys.stderr,
            flush=True,
        )
        return 1
    print(f"gpu-service: {UVM_DEVICES} ready ({shlex.join(argv)})", flush=True)
    return 0


def prepare(settings: ServiceSettings, docker: str, sleep: Callable[[float], None] = time.sleep) -> int:
    if settings.image is None:
        return 0
    subprocess.run([docker, "rm", "--force", CONTAINER_NAME], check=False, capture_output=True)
    for attempt in range(1, PULL_ATTEMPTS + 1):
        print(f"gpu-service: pulling {settings.image} (attempt {attempt} of {PULL_ATTEMPTS})", flush=True)
        if subprocess.run([docker, "pull", "--quiet", settings.image], check=False).returncode == 0:
            return 0
        if attempt < PULL_ATTEMPTS:
            sleep(5 * 2 ** (attempt - 1))
    print(f"gpu-service: cannot pull {settings.image}", file=sys.stderr, flush=True)
    return 1


def cleanup(settings: ServiceSettings, docker: str) -> int:
    if settings.image is not None:
        subprocess.run([docker, "rm", "--force", CONTAINER_NAME], check=False, capture_output=True)
    return 0


def run(settings: ServiceSettings, docker: str) -> int:
    argv = docker_run_argv(settings, docker) if settings.image is not None else command_argv(settings)
    print(f"gpu-service: starting {shlex.join(argv)}", flush=True)
    os.execvpe(argv[0], argv, service_env(dict(os.environ)))  # noqa: S606 - the fleet's configured server


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m serving.launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("prepare", "run", "cleanup"))
    parser.add_argument("--config", default=SERVICE_FILE, help="the service's settings (service.json)")
    parser.add_argument("--docker", default=DOCKER, help="the docker CLI (image mode)")
    parser.add_argument("--nvidia-modprobe", default=NVIDIA_MODPROBE, help="creates the CUDA device files (prepare)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load(args.config)
        if args.action == "prepare":
            return create_uvm_devices(args.nvidia_modprobe) or prepare(settings, args.docker)
        if args.action == "cleanup":
            return cleanup(settings, args.docker)
        return run(settings, args.docker)
    except SettingsError as err:
        print(f"gpu-service: {err}", file=sys.stderr, flush=True)
        return 2
    except OSError as err:  # exec of a missing or non-executable program
        print(f"gpu-service: cannot start the server: {err}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
