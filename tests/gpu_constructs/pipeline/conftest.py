"""One small pipeline, built once for the pipeline package's tests: a source, the synth step, one stage with
its post-deploy check, hardened artifacts and the acknowledgments, with the rule packs enforced at synth."""

from __future__ import annotations

import pytest
from aws_cdk import Stack, Stage, pipelines
from aws_cdk import aws_ssm as ssm
from aws_cdk.assertions import Template

from gpu_constructs.pipeline.pipeline_acknowledgments import acknowledge_pipeline_grants
from gpu_constructs.pipeline.pipeline_artifacts import PipelineArtifacts
from gpu_constructs.pipeline.pipeline_steps import manual_approval, post_deploy_check, synth_step
from stacks.compliance import FAIL_ON_FINDINGS, enforce_rule_packs, platform_app
from tests.gpu_constructs.helpers import CDK_CONTEXT, ENV, template
from tests.gpu_constructs.pipeline.helpers import TARGET_ACCOUNT


@pytest.fixture(scope="package")
def pipeline_stack() -> Stack:
    app = platform_app(context={**CDK_CONTEXT, FAIL_ON_FINDINGS: True})
    enforce_rule_packs(app)
    stack = Stack(app, "Pipe", env=ENV)
    source = pipelines.CodePipelineSource.connection(
        "example/gpu-platform", "main", connection_arn="arn:aws:codeconnections:us-east-1:111111111111:connection/c"
    )
    pipeline = pipelines.CodePipeline(stack, "Pipeline", synth=synth_step(source=source), cross_account_keys=True,
                                      enable_key_rotation=True)  # fmt: skip
    stage = Stage(app, "dev", env={"account": TARGET_ACCOUNT, "region": "us-east-1"})
    ssm.StringParameter(Stack(stage, "Probe"), "P", string_value="v")
    check = post_deploy_check(stack, environment="dev", account=TARGET_ACCOUNT, region="us-east-1", source=source)
    pipeline.add_stage(stage, pre=[manual_approval(environment="dev")], post=[check])
    pipeline.build_pipeline()
    PipelineArtifacts(stack, "Artifacts", bucket=pipeline.pipeline.artifact_bucket)
    acknowledge_pipeline_grants(pipeline, check_projects={"dev": check.project})
    return stack


@pytest.fixture(scope="package")
def pipeline_template(pipeline_stack: Stack) -> Template:
    # Synthesizing the app runs the rule packs: an unacknowledged finding fails here.
    return template(pipeline_stack)
