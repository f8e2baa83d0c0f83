"""One ``scheduler: slurm`` fleet on AWS PCS: its launch template, a compute node group per purchase option and the
Slurm queue (partition) in front of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnTag
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_pcs as pcs
from constructs import Construct

from config.catalog import InstanceType
from config.fleets import CapacityReservation, Fleet, NodeGroupPlan, Placement, PurchaseOption, node_group_plans
from config.fleets.capacity import ReservationPreference
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.fleet.fleet_launch_template import FleetLaunchTemplate, Volumes
from gpu_constructs.fleet.gpu_fleet import efa_only_type


@dataclass(frozen=True)
class NodeSecurityGroups:
    """The groups a Slurm fleet's nodes carry: the platform's (node, EFA, training) and the Slurm nodes' group."""

    node: ec2.ISecurityGroup
    efa: ec2.ISecurityGroup
    training: ec2.ISecurityGroup
    slurm: ec2.ISecurityGroup


def reservation_specification(reservation: CapacityReservation | None) -> dict[str, Any] | None:
    """The fleet's On-Demand Capacity Reservation as a launch template takes it: one target (a reservation or a
    reservation group, config/fleets/scheduler.py) or a preference; "capacity-reservations-first" with no target
    is ``open`` (any open reservation that matches), and EC2 takes one option at a time."""
    if reservation is None or reservation.preference is ReservationPreference.DEFAULT:
        return None
    if reservation.preference is ReservationPreference.NONE:
        return {"CapacityReservationPreference": "none"}
    if reservation.ids:
        return {"CapacityReservationTarget": {"CapacityReservationId": reservation.ids[0]}}
    if reservation.resource_group_arns:
        return {
            "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": reservation.resource_group_arns[0]}
        }
    return {"CapacityReservationPreference": "open"}


def multipart(user_data: ec2.UserData) -> ec2.MultipartUserData:
    """The fleet's shell user data as the one part of a MIME multi-part archive: PCS merges the template's user
    data with its own parts and takes only that format (AWS PCS User Guide, "Working with Amazon EC2 user data").
    A text/x-shellscript part runs after the node registered with PCS and before slurmd starts."""
    archive = ec2.MultipartUserData()
    archive.add_part(ec2.MultipartBody.from_user_data(user_data))
    return archive


class SlurmFleet(Construct):
    """The fleet's launch template comes from the fleet builder (``FleetLaunchTemplate``: IMDSv2, encrypted
    volumes, EFA interfaces, the node, EFA and training groups) with what PCS asks of it (see there); the On-Demand
    node group of a fleet with a reservation and Spot too gets a second template that targets the reservation.
    Every node group names its template by id at ``LatestVersionNumber`` (a new AMI or setting reaches the nodes
    PCS launches next), the fleet's instance types, its subnets, the PCS instance profile, min and max from
    ``node_group_plans``. The queue, named after the fleet, takes them all.

    Attributes:
        launch_templates (``"standard"``, and ``"reserved"`` where one is needed), placement_group (or None),
        node_groups (plan key -> L1 node group), queue (L1), plans.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fleet: Fleet,
        instance_types: Sequence[InstanceType],
        cluster_id: str,
        subnet_ids: Sequence[str],
        machine_image: ec2.IMachineImage,
        user_data: ec2.UserData,
        instance_profile: iam.IInstanceProfile,
        security_groups: NodeSecurityGroups,
        volume_key: kms.IKey,
        placement_tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.plans = node_group_plans(fleet)
        self.placement_group: ec2.CfnPlacementGroup | None = None
        if fleet.placement is not Placement.NONE:
            # Tags is create-only for a placement group: the pinned set, as for every fleet (gpu_fleet.py).
            tags = [CfnTag(key=k, value=v) for k, v in sorted((placement_tags or {}).items())]
            self.placement_group = ec2.CfnPlacementGroup(
                self, "PlacementGroup", strategy=fleet.placement.value, tags=tags or None
            )
        template = self._template_maker(fleet, instance_types, machine_image, user_data, security_groups, volume_key)
        reservation = reservation_specification(fleet.capacity_reservation)
        if reservation is None:
            self.launch_templates = {"standard": template("Template", None)}
        elif self._only_on_demand():
            self.launch_templates = {"reserved": template("Template", reservation)}
        else:
            self.launch_templates = {
                "standard": template("Template", None),
                "reserved": template("TemplateReserved", reservation),
            }
        self.node_groups = {
            plan.key: self._node_group(fleet, plan, cluster_id, subnet_ids, instance_profile) for plan in self.plans
        }
        self.queue = pcs.CfnQueue(
            self,
            "Queue",
            cluster_id=cluster_id,
            name=fleet.name,
            compute_node_group_configurations=[
                pcs.CfnQueue.ComputeNodeGroupConfigurationProperty(compute_node_group_id=group.attr_id)
                for group in self.node_groups.values()
            ],
        )

    def _only_on_demand(self) -> bool:
        return all(plan.purchase is PurchaseOption.ONDEMAND for plan in self.plans)

    def _template_maker(
        self,
        fleet: Fleet,
        instance_types: Sequence[InstanceType],
        machine_image: ec2.IMachineImage,
        user_data: ec2.UserData,
        groups: NodeSecurityGroups,
        volume_key: kms.IKey,
    ) -> Any:
        """A function (construct id, reservation) -> the fleet's launch template with that reservation."""
        first = instance_types[0]
        cards = tuple(range(first.max_efa_interfaces)) if fleet.efa else ()
        block = fleet.capacity_block
        archive = multipart(user_data)

        def make(construct_id: str, reservation: dict[str, Any] | None) -> ec2.LaunchTemplate:
            return FleetLaunchTemplate(
                self,
                construct_id,
                machine_image=machine_image,
                user_data=archive,
                instance_profile=None,
                node_security_group=groups.node,
                efa_security_group=groups.efa,
                training_security_group=groups.training,
                more_security_groups=[groups.slurm],
                efa_cards=cards,
                efa_only=bool(cards) and efa_only_type(first),
                volumes=Volumes(root_gib=fleet.root_volume_gib, scratch_gib=fleet.scratch_volume_gib),
                volume_key=volume_key,
                containers=fleet.containers,
                capacity_block_id=block.id if block else None,
                # PCS takes a Capacity Block's type from the template (and it must be the block's).
                instance_type=first.instance_type if block else None,
                placement_group_name=self.placement_group.ref if self.placement_group else None,
                capacity_reservation=reservation,
            ).launch_template

        return make

    def _node_group(
        self,
        fleet: Fleet,
        plan: NodeGroupPlan,
        cluster_id: str,
        subnet_ids: Sequence[str],
        instance_profile: iam.IInstanceProfile,
    ) -> pcs.CfnComputeNodeGroup:
        reserved = plan.purchase is PurchaseOption.ONDEMAND and "reserved" in self.launch_templates
        template = cfn_child(self.launch_templates["reserved" if reserved else "standard"], ec2.CfnLaunchTemplate)
        spot = plan.purchase is PurchaseOption.SPOT
        return pcs.CfnComputeNodeGroup(
            self,
            f"NodeGroup-{plan.key}",
            cluster_id=cluster_id,
            iam_instance_profile_arn=instance_profile.instance_profile_arn,
            instance_configs=[
                # Sorted: a reorder in the config changes nothing (InstanceConfigs is create-only).
                pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=name)
                for name in sorted(fleet.instance_types)
            ],
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=plan.min, max_instance_count=plan.max
            ),
            subnet_ids=list(subnet_ids),
            purchase_option=plan.purchase.value,
            spot_options=pcs.CfnComputeNodeGroup.SpotOptionsProperty(
                allocation_strategy=fleet.spot_allocation_strategy.value
            )
            if spot
            else None,
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=template.ref, version=template.attr_latest_version_number
            ),
        )
