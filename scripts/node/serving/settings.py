"""The service a node runs, as the user data hands it over in ``/etc/gpu-platform/service.json``.

``{"port": 8080, "health_check_path": "/health", "command": "..." | null, "image": "..." | null,
"start_timeout_seconds": 600}``: exactly one of ``command`` (run on the host) and ``image`` (a container);
``start_timeout_seconds`` (optional, 600) bounds the bootstrap's wait for the first 200 of the health check.

``python3 -m serving.settings --config FILE`` prints ``MODE=``, ``PORT=``, ``HEALTH_CHECK_PATH=`` and
``START_TIMEOUT=`` lines for the bootstrap; a bad file is one line on stderr naming file, field and fix
(exit 1).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVICE_FILE = "/etc/gpu-platform/service.json"
DEFAULT_START_TIMEOUT_S = 600
_PATH = re.compile(r"^/[A-Za-z0-9._~/-]{0,1023}$")
_FIELDS = {"port", "health_check_path", "command", "image", "start_timeout_seconds"}


class SettingsError(ValueError):
    """One line: the file, the field and the fix."""


@dataclass(frozen=True)
class ServiceSettings:
    port: int
    health_check_path: str
    command: str | None
    image: str | None
    start_timeout_seconds: int = DEFAULT_START_TIMEOUT_S

    @property
    def mode(self) -> str:
        return "image" if self.image is not None else "command"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.health_check_path}"


def _int(data: dict[str, Any], key: str, low: int, high: int, source: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SettingsError(f"{source}: {key} must be a whole number from {low} to {high}, got {value!r}")
    return value


def _text(data: dict[str, Any], key: str, limit: int, source: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit or "\n" in value or "\0" in value:
        raise SettingsError(f"{source}: {key} must be one line of 1 to {limit} characters, got {value!r}")
    return value


def parse(text: str, source: str = SERVICE_FILE) -> ServiceSettings:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise SettingsError(
            f"{source}: not JSON ({err.msg} at line {err.lineno}); fix: the user data writes it"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"{source}: must be a JSON object with port and health_check_path")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise SettingsError(f"{source}: unknown field {unknown[0]}; fix: keep to {', '.join(sorted(_FIELDS))}")
    path = data.get("health_check_path")
    if not isinstance(path, str) or not _PATH.match(path):
        raise SettingsError(f"{source}: health_check_path must be a URL path starting with /, got {path!r}")
    settings = ServiceSettings(
        port=_int(data, "port", 1024, 65535, source),
        health_check_path=path,
        command=_text(data, "command", 4096, source),
        image=_text(data, "image", 512, source),
        start_timeout_seconds=_int(data, "start_timeout_seconds", 1, 7200, source, DEFAULT_START_TIMEOUT_S),
    )
    if (settings.command is None) == (settings.image is None):
        raise SettingsError(f"{source}: give exactly one of command and image; fix: set the other to null")
    return settings


def load(path: str | Path = SERVICE_FILE) -> ServiceSettings:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise SettingsError(f"{path}: cannot read it ({err.strerror}); fix: the user data writes it") from None
    return parse(text, str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m serving.settings", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=SERVICE_FILE)
    args = parser.parse_args(argv)
    try:
        settings = load(args.config)
    except SettingsError as err:
        print(err, file=sys.stderr)
        return 1
    print(f"MODE={settings.mode}")
    print(f"PORT={settings.port}")
    print(f"HEALTH_CHECK_PATH={settings.health_check_path}")
    print(f"START_TIMEOUT={settings.start_timeout_seconds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
