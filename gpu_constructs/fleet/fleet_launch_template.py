"""One launch template for GPU nodes of one EFA interface layout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from gpu_constructs.compliance.cfn_child import cfn_child

ROOT_DEVICE = "/dev/sda1"  # Ubuntu AMIs (the Deep Learning base AMI too)
SCRATCH_DEVICE = "/dev/sdb"


@dataclass(frozen=True)
class Volumes:
    root_gib: int
    scratch_gib: int  # 0: none


class FleetLaunchTemplate(Construct):
    """IMDSv2-only, encrypted gp3, no key pair, no public address.

    With ``efa_cards`` (the network card indexes of the layout) the template
    declares one EFA device per card, each interface in the EFA and node groups:
    ``efa`` interfaces (EFA with ENA), device index 0 on card 0 and 1 on the others
    (p4d and the like); with ``efa_only`` (p5 and later) a plain ENA primary
    interface (card 0, device 0), then ``efa-only`` interfaces on card 0 device 1
    and on the other cards device 0, as EC2 recommends for these types. Without
    ``efa_cards`` the node group is set on the template and the instance gets one
    ordinary interface. With ``training_security_group`` (a training fleet) every interface that carries the
    node group carries the training group too.

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
        instance_profile: iam.IInstanceProfile | None,
        node_security_group: ec2.ISecurityGroup,
        efa_security_group: ec2.ISecurityGroup,
        efa_cards: Sequence[int],
        volumes: Volumes,
        volume_key: kms.IKey,
        containers: bool,
        efa_only: bool = False,
        training_security_group: ec2.ISecurityGroup | None = None,
        capacity_block_id: str | None = None,
        instance_type: str | None = None,
        more_security_groups: Sequence[ec2.ISecurityGroup] = (),
        placement_group_name: str | None = None,
        capacity_reservation: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.launch_template = ec2.LaunchTemplate(
            self,
            "Template",
            machine_image=machine_image,
            # Set only where no mixed-instances policy supplies the type (a Capacity Block).
            instance_type=ec2.InstanceType(instance_type) if instance_type else None,
            user_data=user_data,
            instance_profile=instance_profile,
            block_devices=_block_devices(volumes, volume_key),
            require_imdsv2=True,
            http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,
            http_endpoint=True,
            # Containers sit one network hop further from IMDS than the host.
            http_put_response_hop_limit=2 if containers else 1,
            instance_metadata_tags=True,  # the node reads its Auto Scaling group name from its tags
            security_group=None if efa_cards else node_security_group,
            associate_public_ip_address=None if efa_cards else False,
        )
        extra = [*([training_security_group] if training_security_group is not None else []), *more_security_groups]
        cfn = cfn_child(self.launch_template, ec2.CfnLaunchTemplate)
        if efa_cards:
            groups = [g.security_group_id for g in (efa_security_group, node_security_group, *extra)]
            # No AssociatePublicIpAddress: the GPU subnets map no public address, and EC2 refuses the
            # setting on a launch with several interfaces.
            cfn.add_property_override("LaunchTemplateData.NetworkInterfaces", _interfaces(efa_cards, efa_only, groups))
        else:
            for group in extra:
                self.launch_template.add_security_group(group)
        _place(cfn, placement_group_name, capacity_reservation, capacity_block_id)


def _block_devices(volumes: Volumes, volume_key: kms.IKey) -> list[ec2.BlockDevice]:
    """The root volume, then the scratch volume where the fleet has one."""
    devices = [_encrypted_gp3(ROOT_DEVICE, volumes.root_gib, volume_key)]
    if volumes.scratch_gib:
        devices.append(_encrypted_gp3(SCRATCH_DEVICE, volumes.scratch_gib, volume_key))
    return devices


def _encrypted_gp3(device: str, gib: int, volume_key: kms.IKey) -> ec2.BlockDevice:
    """A gp3 volume encrypted with ``volume_key``, deleted with the instance."""
    return ec2.BlockDevice(
        device_name=device,
        volume=ec2.BlockDeviceVolume.ebs(
            gib, volume_type=ec2.EbsDeviceVolumeType.GP3, encrypted=True, kms_key=volume_key, delete_on_termination=True
        ),
    )


def _place(
    cfn: ec2.CfnLaunchTemplate,
    placement_group_name: str | None,
    capacity_reservation: Mapping[str, Any] | None,
    capacity_block_id: str | None,
) -> None:
    """The template's placement group, capacity reservation, or Capacity Block (which takes the reservation's
    place), where given."""
    if placement_group_name:
        cfn.add_property_override("LaunchTemplateData.Placement", {"GroupName": placement_group_name})
    if capacity_reservation:
        cfn.add_property_override("LaunchTemplateData.CapacityReservationSpecification", dict(capacity_reservation))
    if capacity_block_id:
        cfn.add_property_override("LaunchTemplateData.InstanceMarketOptions", {"MarketType": "capacity-block"})
        cfn.add_property_override(
            "LaunchTemplateData.CapacityReservationSpecification",
            {"CapacityReservationTarget": {"CapacityReservationId": capacity_block_id}},
        )


def _interfaces(cards: Sequence[int], efa_only: bool, groups: list[str]) -> list[dict]:
    def nic(card: int, device: int, kind: str | None) -> dict:
        spec = {"NetworkCardIndex": card, "DeviceIndex": device, "Groups": groups, "DeleteOnTermination": True}
        return {**spec, "InterfaceType": kind} if kind else spec

    if not efa_only:
        return [nic(card, 0 if card == 0 else 1, "efa") for card in cards]
    return [nic(0, 0, None), *(nic(card, 1 if card == 0 else 0, "efa-only") for card in cards)]
