"""Configs built in tmp_path from the test configs, and the CLI run in-process."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "config"


def config_dir(tmp_path: Path, env: str = "dev", change: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """A copy of the test configs; ``change`` edits ``env``'s YAML document."""
    folder = tmp_path / "config"
    folder.mkdir(exist_ok=True)
    for path in FIXTURES.glob("*.yaml"):
        shutil.copy(path, folder / path.name)
    if change is not None:
        doc = yaml.safe_load((folder / f"{env}.yaml").read_text(encoding="utf-8"))
        change(doc)
        (folder / f"{env}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return folder


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
