"""Fixtures of the fabric-test tests: staging's account in moto, and no pause between two polls of the jobs."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from tests.ops.fabric.fakes import fabric_account


@pytest.fixture(autouse=True)
def no_polling_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake nodes answer at once: the check's pause between two looks at its jobs is not waited out."""
    monkeypatch.setattr("ops.fabric.jobs.POLL_S", 0.0)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.session.Session]:
    """Staging's account in moto, with the jobs log group (tests/ops/fabric/fakes.py)."""
    with fabric_account(monkeypatch) as session:
        yield session
