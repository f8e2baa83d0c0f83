"""One launch template for GPU nodes of one EFA interface layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

ROOT_DEVICE = "/dev/sda1"  # Ubuntu AMIs (the Deep Learning base AMI too)
SCRATCH_DEVICE = "/dev/sdb"


@dataclass(frozen=True)
class Volumes:
    root_gib: int
    scratch_gib: int  # 0: none


class FleetLaunchTemplate(Construct):
    """IMDSv2-only, encrypted gp3, no key pair, no public address.

    With ``efa_cards`` (the network card indexes of the layout) the template
    declares one ``efa`` interface per card, device index 0 on card 0 and 1 on
    the others, each in the EFA and node groups; without it the node group is set
    on the template and the instance gets one ordinary interface.

    Attributes:
        launch_template.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        machine_image: ec2.IMachineImage,
        user_data: ec2.UserData,
        instance_profile: iam.IInstanceProfile,
        node_security_group: ec2.ISecurityGroup,
        efa_security_group: ec2.ISecurityGroup,
        efa_cards: Sequence[int],
        volumes: Volumes,
        volume_key: kms.IKey,
        containers: bool,
        capacity_block_id: str | None = None,
        instance_type: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        devices = [
            ec2.BlockDevice(
                device_name=ROOT_DEVICE,
                volume=ec2.BlockDeviceVolume.ebs(
                    volumes.root_gib,
                    volume_type=ec2.EbsDeviceVolumeType.GP3,
                    encrypted=True,
                    kms_key=volume_key,
                    delete_on_termination=True,
                ),
            )
        ]
        if volumes.scratch_gib:
            devices.append(
                ec2.BlockDevice(
                    device_name=SCRATCH_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        volumes.scratch_gib,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        kms_key=volume_key,
                        delete_on_termination=True,
                    ),
                )
            )
        self.launch_template = ec2.LaunchTemplate(
            self,
            "Template",
            machine_image=machine_image,
            # Set only where no mixed-instances policy supplies the type (a Capacity Block).
            instance_type=ec2.InstanceType(instance_type) if instance_type else None,
            user_data=user_data,
            instance_profile=instance_profile,
            block_devices=devices,
            require_imdsv2=True,
            http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,
            http_endpoint=True,
            # Containers sit one network hop further from IMDS than the host.
            http_put_response_hop_limit=2 if containers else 1,
            instance_metadata_tags=True,  # the node reads its Auto Scaling group name from its tags
            security_group=None if efa_cards else node_security_group,
            associate_public_ip_address=None if efa_cards else False,
        )
        cfn: ec2.CfnLaunchTemplate = self.launch_template.node.default_child
        if efa_cards:
            cfn.add_property_override(
                "LaunchTemplateData.NetworkInterfaces",
                [
                    {
                        "NetworkCardIndex": card,
                        "DeviceIndex": 0 if card == 0 else 1,
                        "InterfaceType": "efa",
                        "Groups": [efa_security_group.security_group_id, node_security_group.security_group_id],
                        "AssociatePublicIpAddress": False,
                        "DeleteOnTermination": True,
                    }
                    for card in efa_cards
                ],
            )
        if capacity_block_id:
            cfn.add_property_override("LaunchTemplateData.InstanceMarketOptions", {"MarketType": "capacity-block"})
            cfn.add_property_override(
                "LaunchTemplateData.CapacityReservationSpecification",
                {"CapacityReservationTarget": {"CapacityReservationId": capacity_block_id}},
            )
