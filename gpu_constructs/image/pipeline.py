"""An EC2 Image Builder pipeline: recipe + infrastructure + distribution, on a schedule, tests on."""

from __future__ import annotations

from aws_cdk import aws_imagebuilder as imagebuilder
from constructs import Construct

#: Build only when the schedule matches AND a dependency changed. A recipe whose parent is an
#: SSM parameter counts a new value of that parameter as a dependency update, so a new parent
#: AMI (security fixes) is built within a week; an unchanged parent builds nothing and the
#: fleets are not churned by a byte-identical AMI. New versions arrive by deploy + on-demand run.
START_CONDITION = "EXPRESSION_MATCH_AND_DEPENDENCY_UPDATES_AVAILABLE"


class ImagePipeline(Construct):
    """An ``AWS::ImageBuilder::ImagePipeline``, enabled, with image tests on.

    ``schedule`` is an Image Builder cron expression (UTC); a build can also be started at any
    time with ``aws imagebuilder start-image-pipeline-execution``. The test stage runs the
    recipe's test phases and test components and fails the image (nothing is distributed)
    when one fails. Image Builder writes its logs to the named log groups, which the caller
    creates encrypted and with a retention period.

    Attributes:
        pipeline: the L1 resource; arn.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        description: str,
        recipe_arn: str,
        infrastructure_arn: str,
        distribution_arn: str,
        schedule: str,
        test_timeout_minutes: int,
        image_log_group_name: str,
        pipeline_log_group_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        pipe = imagebuilder.CfnImagePipeline
        self.pipeline = pipe(
            self,
            "Pipeline",
            name=name,
            description=description,
            image_recipe_arn=recipe_arn,
            infrastructure_configuration_arn=infrastructure_arn,
            distribution_configuration_arn=distribution_arn,
            status="ENABLED",
            schedule=pipe.ScheduleProperty(
                schedule_expression=schedule, pipeline_execution_start_condition=START_CONDITION
            ),
            image_tests_configuration=pipe.ImageTestsConfigurationProperty(
                image_tests_enabled=True, timeout_minutes=test_timeout_minutes
            ),
            # Enhanced metadata runs Systems Manager inventory on the build instance; the AMI's
            # tags already name every pinned version, so the instance role needs no ssm:PutInventory.
            enhanced_image_metadata_enabled=False,
            logging_configuration=pipe.PipelineLoggingConfigurationProperty(
                image_log_group_name=image_log_group_name, pipeline_log_group_name=pipeline_log_group_name
            ),
        )
        self.arn = self.pipeline.attr_arn
