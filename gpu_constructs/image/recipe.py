"""An EC2 Image Builder image recipe: a parent image and components with their parameters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import Stack
from aws_cdk import aws_imagebuilder as imagebuilder
from constructs import Construct

from gpu_constructs.image.component import ImageComponent, content_version


@dataclass(frozen=True)
class RecipeStep:
    """One component of the recipe, with the values of its parameters (name -> value)."""

    component: ImageComponent
    parameters: Mapping[str, str] = field(default_factory=dict)


class ImageRecipe(Construct):
    """An ``AWS::ImageBuilder::ImageRecipe``.

    ``parent_image`` is anything Image Builder accepts (``ssm:<parameter>``, an AMI id, an
    image ARN). The root volume is gp3 and encrypted, with ``kms_key_arn`` where given (else
    the account's default EBS key, whose snapshots cannot be shared or copied to another
    account), so the AMI's snapshots are encrypted with that key too. The version is derived
    from everything the recipe holds, so that CloudFormation's replacement of a changed recipe
    gets a new one.

    Attributes:
        recipe: the L1 resource; name, version, arn.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        description: str,
        parent_image: str,
        steps: Sequence[RecipeStep],
        root_device_name: str,
        root_volume_gib: int,
        kms_key_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.name = name
        # Every create-only property of the recipe, with each component by its own version
        # (its ARN is only known at deploy time) and parameter values as CloudFormation sees them.
        self.version = content_version(
            name,
            description,
            parent_image,
            root_device_name,
            root_volume_gib,
            stack.resolve(kms_key_arn),
            [(s.component.name, s.component.version, stack.resolve(dict(s.parameters))) for s in steps],
        )
        self.recipe = imagebuilder.CfnImageRecipe(
            self,
            "Recipe",
            name=name,
            version=self.version,
            description=description,
            parent_image=parent_image,
            components=_component_configurations(steps),
            block_device_mappings=[_root_volume(root_device_name, root_volume_gib, kms_key_arn)],
        )
        self.arn = self.recipe.attr_arn


def _component_configurations(
    steps: Sequence[RecipeStep],
) -> list[imagebuilder.CfnImageRecipe.ComponentConfigurationProperty]:
    """Each step's component by ARN, with its parameters (none: no ``Parameters`` at all)."""
    return [
        imagebuilder.CfnImageRecipe.ComponentConfigurationProperty(
            component_arn=step.component.arn,
            parameters=[
                imagebuilder.CfnImageRecipe.ComponentParameterProperty(name=key, value=[value])
                for key, value in step.parameters.items()
            ]
            or None,
        )
        for step in steps
    ]


def _root_volume(
    device_name: str, volume_gib: int, kms_key_arn: str | None
) -> imagebuilder.CfnImageRecipe.InstanceBlockDeviceMappingProperty:
    """The root volume: gp3, encrypted (with ``kms_key_arn`` where given), deleted with the instance."""
    return imagebuilder.CfnImageRecipe.InstanceBlockDeviceMappingProperty(
        device_name=device_name,
        ebs=imagebuilder.CfnImageRecipe.EbsInstanceBlockDeviceSpecificationProperty(
            volume_size=volume_gib,
            volume_type="gp3",
            encrypted=True,
            kms_key_id=kms_key_arn,
            delete_on_termination=True,
        ),
    )
