"""Where a finished image goes: an AMI in this region, copies in other accounts, each id in an SSM parameter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_imagebuilder as imagebuilder
from constructs import Construct

PARAMETER_DATA_TYPE = "aws:ec2:image"


@dataclass(frozen=True)
class DistributionTarget:
    """An account and region that receives a copy of each AMI, and the parameter its id goes to there."""

    account: str
    region: str
    parameter_name: str


class ImageDistribution(Construct):
    """An ``AWS::ImageBuilder::DistributionConfiguration``.

    The AMI is named ``<ami_name_prefix>-<build date>`` and tagged with ``ami_tags``; after
    each successful build Image Builder writes its id to ``parameter_name`` in this account
    and region (data type ``aws:ec2:image``, created if missing, overwritten otherwise).

    Each of ``targets`` in another account gets a copy of the AMI that it owns
    (``TargetAccountIds`` of its region: a copy, not a launch permission on this account's
    AMI, so the receiving account depends on nothing here once the copy is made), and the
    copy's id in its ``parameter_name`` (``SsmParameterConfigurations`` with
    ``AmiAccountId``: written in that account through its
    ``EC2ImageBuilderDistributionCrossAccountRole``). A target in this account only gets the
    parameter (in another region, a copy there too). One distribution per region, this
    region first. No ``KmsKeyId``: each copy is encrypted with the receiving account's default
    EBS key (an encrypted snapshot is never copied unencrypted).

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
        targets: Sequence[DistributionTarget] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        account = Stack.of(self).account
        dist = imagebuilder.CfnDistributionConfiguration
        own = DistributionTarget(account=account, region=region, parameter_name=parameter_name)
        by_region: dict[str, list[DistributionTarget]] = {region: [own]}
        for target in targets:
            by_region.setdefault(target.region, []).append(target)

        def ami(copies: Sequence[DistributionTarget]) -> dict[str, Any]:
            # Typed as a free-form object in the L1: CloudFormation's own key names.
            config: dict[str, Any] = {
                "Name": f"{ami_name_prefix}-{{{{ imagebuilder:buildDate }}}}",
                "Description": description,
                "AmiTags": dict(ami_tags),
            }
            accounts = sorted({t.account for t in copies if t.account != account})
            if accounts:
                config["TargetAccountIds"] = accounts
            return config

        def parameter(
            target: DistributionTarget,
        ) -> imagebuilder.CfnDistributionConfiguration.SsmParameterConfigurationProperty:
            return dist.SsmParameterConfigurationProperty(
                parameter_name=target.parameter_name,
                data_type=PARAMETER_DATA_TYPE,
                ami_account_id=target.account if target.account != account else None,
            )

        self.configuration = dist(
            self,
            "Configuration",
            name=name,
            description=description,
            distributions=[
                dist.DistributionProperty(
                    region=target_region,
                    ami_distribution_configuration=ami(copies),
                    ssm_parameter_configurations=[parameter(t) for t in copies],
                )
                for target_region, copies in by_region.items()
            ],
        )
        self.arn = self.configuration.attr_arn
