"""The pipeline app with its opt-in checks on: the fabric check after staging's deploy and the AMI gate before
prod's, as tests/flows/test_fabric_step.py and tests/flows/test_ami_gate_step.py follow them (the
``checked_synth`` fixture of tests/flows/conftest.py synthesizes it once per run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import app as cdk_app
from config import load_environment
from config.pipeline_schema import PIPELINE_FILE
from stacks.compliance import platform_app
from stacks.pipeline_stack import PIPELINE_STACK_NAME
from tests.config.helpers import valid_pipeline
from tests.ops.helpers import config_dir
from tests.synth import build_once, collect_stacks, synth_context

#: The tooling account the pipeline runs in.
TOOLING = "444444444444"


def with_pipeline(folder: Path, **changes: Any) -> Path:
    """``folder`` with the shipped pipeline config in the tooling account, no approvals, and ``changes``."""
    path = folder / PIPELINE_FILE
    path.parent.mkdir(exist_ok=True)
    data = {**valid_pipeline(), "account": TOOLING, "manual_approval": [], **changes}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder


def synthesize_checked_pipeline(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """``cdk synth -c pipeline=true`` of dev, staging, prod: the fabric check on staging only, prod approved by a
    person and gated on staging's tested AMI (tests/flows/test_ami_gate_step.py)."""
    tmp = tmp_path_factory.mktemp("fabric")
    folder = with_pipeline(config_dir(tmp), fabric_check=["staging"], manual_approval=["prod"], ami_gate=["prod"])
    context = {**synth_context(), "pipeline": "true", "config_dir": str(folder)}

    def build(outdir: Path) -> None:
        app = platform_app(context=context, outdir=str(outdir))
        cdk_app.build(app)
        app.synth()

    outdir = build_once(pytestconfig, tmp_path_factory, "fabric-pipeline.out", build)
    environments = [load_environment(name, folder) for name in ("dev", "staging", "prod")]
    envs = collect_stacks(outdir, environments)
    return {
        "pipeline": json.loads((outdir / f"{PIPELINE_STACK_NAME}.template.json").read_text()),
        **{env.name: envs.stack(env.name, "Fleets").json for env in environments},
        "synth": envs,
    }


def by_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """The template's resources of type ``kind``, by logical id."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def actions(pipeline: dict[str, Any], stage: str) -> list[dict[str, Any]]:
    """The actions of the pipeline's stage named ``stage``."""
    (code_pipeline,) = by_type(pipeline, "AWS::CodePipeline::Pipeline").values()
    return next(s for s in code_pipeline["Properties"]["Stages"] if s["Name"] == stage)["Actions"]
