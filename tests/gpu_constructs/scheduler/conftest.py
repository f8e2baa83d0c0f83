"""The Slurm test environment (tests/fixtures/config/slurm/hpc.yaml), synthesized once per run as ``make synth``
does (rule packs enforced); what its templates' references point at is in helpers.py."""

from __future__ import annotations

import pytest

from tests.gpu_constructs.scheduler.helpers import ENV
from tests.synth import SLURM_DIR, StackTemplate, Synth, synthesize_once


@pytest.fixture(scope="session")
def slurm_synth(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize_once(pytestconfig, tmp_path_factory, "slurm-cdk.out", SLURM_DIR)


@pytest.fixture(scope="session")
def fleets(slurm_synth: Synth) -> StackTemplate:
    """The Slurm environment's fleet stack: the PCS cluster, login nodes, queues and node groups."""
    return slurm_synth.stack(ENV, "Fleets")
