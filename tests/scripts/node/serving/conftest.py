"""Fixtures of the service's node tests: a fake docker and a fake nvidia-modprobe, each recording its calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts.node.serving.support import FAKE_DOCKER, FAKE_NVIDIA_MODPROBE


@pytest.fixture
def docker(tmp_path: Path) -> Path:
    path = tmp_path / "docker"
    path.write_text(FAKE_DOCKER)
    path.chmod(0o755)
    return path


@pytest.fixture
def modprobe(tmp_path: Path) -> Path:
    path = tmp_path / "nvidia-modprobe"
    path.write_text(FAKE_NVIDIA_MODPROBE)
    path.chmod(0o755)
    return path
