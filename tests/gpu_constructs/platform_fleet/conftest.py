"""The Slurm test environment (an Auto Scaling fleet beside three Slurm fleets) built in this process, unsynthesized:
its fleet stack's site and fleet handles are Python objects the templates do not show."""

from __future__ import annotations

import pytest
from aws_cdk import App

from config import load_platform
from config.pipeline_schema import pipeline_roles
from stacks.platform_stage import PlatformStage
from tests.synth import SLURM_DIR, cdk_json_context


@pytest.fixture(scope="module")
def stage() -> PlatformStage:
    platform = load_platform(config_dir=SLURM_DIR)
    (env,) = platform.selected_environments
    return PlatformStage(
        App(context=cdk_json_context()),
        env=env,
        image_sharing=platform.sharing(env.name),
        pipeline_roles=pipeline_roles(env, SLURM_DIR),
    )
