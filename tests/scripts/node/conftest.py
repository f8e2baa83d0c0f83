"""Fixtures of the node tests: one moto Auto Scaling endpoint per module, and a node that passes every bootstrap step
(tests/scripts/node/fake_node.py) per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from tests.scripts.node.fake_aws import FakeAws, LifecycleFleet
from tests.scripts.node.fake_node import Node, new_node, stop_service
from tests.scripts.node.helpers import FakeImds


@pytest.fixture(scope="module")
def shared_aws() -> Iterator[FakeAws]:
    """One moto group and one endpoint for the module (moto set-up is the slow part); reset per test."""
    with mock_aws(), FakeAws(LifecycleFleet()) as aws:
        yield aws


@pytest.fixture
def node(tmp_path: Path, shared_aws: FakeAws) -> Iterator[Node]:
    """A p4d node that passes every step, its files under ``tmp_path``; the units it started are stopped after."""
    shared_aws.reset()
    with FakeImds() as imds:
        yield new_node(tmp_path, shared_aws, imds)
    stop_service(tmp_path)
