"""Shared fixtures: the whole app is synthesized once per test run (tests/synth.py), and so are the fleet synth
(tests/fleet_synth.py) and the pipeline app (tests/pipeline_synth.py) that tests of several folders read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# jsii must run on the project's pinned Node.js, not the system's.
os.environ["PATH"] = f"{ROOT / 'node_modules' / '.bin'}{os.pathsep}{os.environ['PATH']}"
# A deprecated CDK API raises instead of printing a warning, in every synth of the run (in this process,
# whose jsii runtime starts on the first aws_cdk import below, and in each app or CLI it starts):
# tests/test_no_deprecated_api.py.
os.environ["JSII_DEPRECATED"] = "fail"
# moto's EC2 backend loads its catalogue of public AMIs each time one is made (every mock_aws test, every
# moto server): seconds of CPU a test here never reads (the tests register the images they look up).
# Also set for the node scripts' subprocesses, which inherit it.
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
# The suite starts Python hundreds of times (node scripts, the app, pytest's workers): with bytecode
# caching off (PYTHONDONTWRITEBYTECODE), each start compiles the project's modules again and pytest
# rewrites every test module's asserts again. The caches go to __pycache__/, which git ignores.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from config.loader import CONFIG_DIR  # noqa: E402
from tests.botocore_models import share_loaded_models  # noqa: E402
from tests.fleet_synth import synthesize_fleets  # noqa: E402
from tests.pipeline_synth import PipelineSynth, synthesize_pipeline  # noqa: E402
from tests.synth import Synth, synthesize_once  # noqa: E402 - after PATH is set

share_loaded_models()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow: over about 3 s on 2 cores (CLI synth, cfn-lint, the shipped-config copy run, "
        "node flows that wait on timers); make test-fast leaves them out",
    )


@pytest.fixture(scope="session")
def synth(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Every environment of the test configs (tests/fixtures/config/), synthesized once per run."""
    return synthesize_once(pytestconfig, tmp_path_factory, "cdk.out")


@pytest.fixture(scope="session")
def shipped_synth(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Every environment of the shipped config/: for the snapshot tests only."""
    return synthesize_once(pytestconfig, tmp_path_factory, "shipped-cdk.out", CONFIG_DIR)


@pytest.fixture(scope="session")
def fleet_synth(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The test dev config with fleets the shipped configs lack (tests/fleet_synth.py), synthesized once per run."""
    return synthesize_fleets(pytestconfig, tmp_path_factory)


@pytest.fixture(scope="session")
def pipeline_synth(tmp_path_factory: pytest.TempPathFactory) -> PipelineSynth:
    """The pipeline app as ``cdk synth -c pipeline=true`` builds it, synthesized once per test session."""
    return synthesize_pipeline(tmp_path_factory.mktemp("pipeline.out"))
