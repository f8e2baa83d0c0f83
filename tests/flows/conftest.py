"""Fixtures of the flow tests that more than one module follows."""

from __future__ import annotations

from typing import Any

import pytest

from tests.flows.checked_pipeline import synthesize_checked_pipeline


@pytest.fixture(scope="session")
def checked_synth(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The pipeline app with the fabric check on staging and the AMI gate on prod (tests/flows/checked_pipeline.py):
    the pipeline template, each environment's Fleets template, and the environments' synth (``"synth"``)."""
    return synthesize_checked_pipeline(pytestconfig, tmp_path_factory)
