"""The pipeline app (``cdk synth -c pipeline=true``) as the tests read it (the ``pipeline_synth`` fixture of
tests/conftest.py synthesizes it once per test session)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template

import app as cdk_app
from config.pipeline_schema import Pipeline, load_pipeline
from stacks.compliance import FAIL_ON_FINDINGS, platform_app
from stacks.pipeline_stack import PIPELINE_STACK_NAME, PipelineStack
from tests.synth import cdk_json_context


@dataclass
class PipelineSynth:
    app: App
    outdir: Path
    config: Pipeline
    stack: PipelineStack

    @cached_property
    def json(self) -> dict[str, Any]:
        return json.loads((self.outdir / f"{PIPELINE_STACK_NAME}.template.json").read_text())

    @cached_property
    def template(self) -> Template:
        return Template.from_json(self.json)

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == type_}

    @cached_property
    def stages(self) -> list[dict[str, Any]]:
        (pipeline,) = self.resources("AWS::CodePipeline::Pipeline").values()
        return pipeline["Properties"]["Stages"]

    def stage(self, name: str) -> dict[str, Any]:
        return next(s for s in self.stages if s["Name"] == name)

    def project(self, logical_id_ref: dict[str, Any]) -> dict[str, Any]:
        return self.json["Resources"][logical_id_ref["Ref"]]


def synthesize_pipeline(outdir: Path) -> PipelineSynth:
    """The pipeline app built by ``app.build`` from the context the CLI passes for ``-c pipeline=true``."""
    context = cdk_json_context()
    context.update({"pipeline": "true", FAIL_ON_FINDINGS: True})
    app = platform_app(context=context, outdir=str(outdir))
    cdk_app.build(app)
    app.synth()
    stack = app.node.find_child(PIPELINE_STACK_NAME)
    assert isinstance(stack, PipelineStack)
    return PipelineSynth(app=app, outdir=outdir, config=load_pipeline(), stack=stack)
