"""ImagePipeline: enabled, tests on, builds on schedule only when a dependency changed, logs to the given groups."""

from __future__ import annotations

from gpu_constructs.image.pipeline import START_CONDITION, ImagePipeline
from tests.gpu_constructs.helpers import bare_stack, only, template


def test_pipeline_runs_tests_and_builds_only_on_new_dependencies() -> None:
    stack = bare_stack()
    ImagePipeline(stack, "Pipe", name="gpu-golden", description="d", recipe_arn="arn:r", infrastructure_arn="arn:i",
                  distribution_arn="arn:d", schedule="cron(0 4 ? * sun *)", test_timeout_minutes=120,
                  image_log_group_name="/aws/imagebuilder/gpu-golden",
                  pipeline_log_group_name="/aws/imagebuilder/pipeline/gpu-golden")  # fmt: skip
    props = only(template(stack), "AWS::ImageBuilder::ImagePipeline")[1]["Properties"]
    assert props["Status"] == "ENABLED"
    assert props["ImageTestsConfiguration"] == {"ImageTestsEnabled": True, "TimeoutMinutes": 120}
    assert props["Schedule"] == {
        "ScheduleExpression": "cron(0 4 ? * sun *)",
        "PipelineExecutionStartCondition": START_CONDITION,
    }
    assert START_CONDITION == "EXPRESSION_MATCH_AND_DEPENDENCY_UPDATES_AVAILABLE"
    assert props["LoggingConfiguration"]["ImageLogGroupName"] == "/aws/imagebuilder/gpu-golden"
    assert (props["ImageRecipeArn"], props["DistributionConfigurationArn"]) == ("arn:r", "arn:d")
