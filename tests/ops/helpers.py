"""Configs built in tmp_path from the test configs, the CLI run in-process, and a moto account."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws

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


@contextmanager
def moto_session(monkeypatch: pytest.MonkeyPatch, *, account: str, region: str) -> Iterator[boto3.session.Session]:
    """A boto3 session on moto as ``account`` in ``region``, with fake credentials in the environment (for the
    commands, which make their own sessions)."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": region,
        "MOTO_ACCOUNT_ID": account,
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield boto3.session.Session(region_name=region)
