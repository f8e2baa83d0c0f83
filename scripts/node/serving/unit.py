"""The drop-in that tells gpu-service.service (scripts/node/systemd/) who runs the service and how long its
start may take, rendered from service.json by the bootstrap's service step into
``/etc/systemd/system/gpu-service.service.d/50-service.conf``.

- ``command``: an unprivileged dynamic user ``gpu-service`` (``DynamicUser=yes``: no account to create, a
  read-only system, its own /tmp), with writable state and cache directories as its home, and the GPUs (the
  NVIDIA device files are world read-write by default; ``video`` covers drivers set up for that group).
- ``image``: the docker CLI as root (it needs docker's socket); the container is the isolation.

Both: ``Environment=PORT=<port>`` and ``TimeoutStartSec`` = the service's start timeout (an image pull in
ExecStartPre counts against it). ``python3 -m serving.unit --config FILE`` prints it.
"""

from __future__ import annotations

import argparse
import sys

from serving.settings import SERVICE_FILE, ServiceSettings, SettingsError, load

UNIT = "gpu-service.service"
DROP_IN = f"{UNIT}.d/50-service.conf"
STATE_DIR = "/var/lib/gpu-service"


def render_drop_in(settings: ServiceSettings) -> str:
    lines = [
        f"# Written by the node bootstrap from {SERVICE_FILE} ({settings.mode} mode).",
        "[Service]",
        f"Environment=PORT={settings.port}",
        f"TimeoutStartSec={settings.start_timeout_seconds}",
    ]
    if settings.image is None:
        lines += [
            "DynamicUser=yes",
            "User=gpu-service",
            "Group=gpu-service",
            "SupplementaryGroups=video",
            "StateDirectory=gpu-service",
            "CacheDirectory=gpu-service",
            f"WorkingDirectory={STATE_DIR}",
            f"Environment=HOME={STATE_DIR}",
            "NoNewPrivileges=yes",
        ]
    else:
        lines.append("# The docker CLI runs as root; the NVIDIA runtime gives the container the GPUs.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m serving.unit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=SERVICE_FILE)
    args = parser.parse_args(argv)
    try:
        print(render_drop_in(load(args.config)), end="")
    except SettingsError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
