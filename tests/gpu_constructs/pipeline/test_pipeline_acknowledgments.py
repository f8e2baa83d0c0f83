"""acknowledge_pipeline_grants: every finding on the roles CDK Pipelines generates is acknowledged policy by
policy, so the pipeline synthesizes with the rule packs enforced; a finding acknowledged elsewhere is not."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Template


def test_pipeline_synthesizes_clean_under_the_rule_packs(pipeline_template: Template, pipeline_stack: Stack) -> None:
    pipeline_template.resource_count_is("AWS::CodePipeline::Pipeline", 1)
    errors = Annotations.from_stack(pipeline_stack).find_error("*", "*")
    assert errors == []
