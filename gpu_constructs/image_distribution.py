"""Where a finished image goes: an AMI in this region, its id written to an SSM parameter."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_imagebuilder as imagebuilder
from constructs import Construct


class ImageDistribution(Construct):
    """An ``AWS::ImageBuilder::DistributionConfiguration`` for one region of this account.

    The AMI is named ``<ami_name_prefix>-<build date>`` and tagged with ``ami_tags``; after
    each successful build Image Builder writes its id to ``parameter_name`` (data type
    ``aws:ec2:image``, created if missing, overwritten otherwise).

    Attributes:
        configuration: the L1 resource; arn.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        description: str,
        region: str,
        ami_name_prefix: str,
        ami_tags: Mapping[str, str],
        parameter_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        dist = imagebuilder.CfnDistributionConfiguration
        self.configuration = dist(
            self,
            "Configuration",
            name=name,
            description=description,
            distributions=[
                dist.DistributionProperty(
                    region=region,
                    # Typed as a free-form object in the L1: CloudFormation's own key names.
                    ami_distribution_configuration={
                        "Name": f"{ami_name_prefix}-{{{{ imagebuilder:buildDate }}}}",
                        "Description": description,
                        "AmiTags": dict(ami_tags),
                    },
                    ssm_parameter_configurations=[
                        dist.SsmParameterConfigurationProperty(parameter_name=parameter_name, data_type="aws:ec2:image")
                    ],
                )
            ],
        )
        self.arn = self.configuration.attr_arn
