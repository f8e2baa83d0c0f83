"""Fixtures of the job runner's tests: a node with its stand-in systemd, IMDS and CloudWatch Logs (support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from tests.scripts.node.helpers import FakeImds
from tests.scripts.node.jobs.support import INSTANCE_ID, LOG_GROUP, FakeLogs, JobNode, job_node_on, kill_units


@pytest.fixture
def job_node(tmp_path: Path) -> Iterator[JobNode]:
    """A node under ``tmp_path`` whose job units are stopped after the test."""
    with pytest.MonkeyPatch.context() as patch:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            patch.setenv(key, "testing")
        with mock_aws(), FakeImds() as imds, FakeLogs() as logs:
            imds.set("/latest/meta-data/instance-id", INSTANCE_ID)
            logs.client.create_log_group(logGroupName=LOG_GROUP)
            node = job_node_on(tmp_path, imds, logs)
            try:
                yield node
            finally:
                kill_units(node)
