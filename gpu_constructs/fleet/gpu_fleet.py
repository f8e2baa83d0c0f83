"""A GPU fleet: launch templates per EFA layout and an Auto Scaling group that mixes Spot with reserved capacity."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.catalog import InstanceType
from config.fleets import CapacityBlock, Fleet, WarmPool
from config.naming import launch_hook_name, terminate_hook_name
from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.fleet.fleet_capacity import Layout, mixed_instances_policy, placement_group, reserve_capacity
from gpu_constructs.fleet.fleet_launch_template import FleetLaunchTemplate, Volumes
from gpu_constructs.fleet.fleet_metrics import gpu_metric
from gpu_constructs.fleet.service_load_balancer import group_health_checks
from gpu_constructs.fleet.step_scaling import add_step_scaling

#: The terminate hook gives a training job this long to flush its checkpoint.
TERMINATE_HOOK_TIMEOUT = Duration.minutes(10)
#: Capacity Block windows: start scaling a few minutes after the block opens, and be
#: at zero well before EC2 reclaims the instances (it begins 30 minutes before the end).
BLOCK_START_DELAY = timedelta(minutes=5)
BLOCK_END_MARGIN = timedelta(minutes=60)


def efa_only_type(item: InstanceType) -> bool:
    """p5 and later (p5, p5e, p5en, p6...): EC2 recommends an ENA primary interface plus EFA-only ones."""
    generation = re.match(r"^p(\d+)", item.family)
    return generation is not None and int(generation.group(1)) >= 5


def _efa_layouts(fleet: Fleet, instance_types: Sequence[InstanceType]) -> dict[Layout, list[InstanceType]]:
    """The fleet's instance types by EFA interface layout (cards, EFA-only style), in preference order."""
    layouts: dict[Layout, list[InstanceType]] = {}
    for item in instance_types:
        cards = tuple(range(item.max_efa_interfaces)) if fleet.efa else ()
        layouts.setdefault((cards, bool(cards) and efa_only_type(item)), []).append(item)
    return layouts


def _iso(moment: datetime) -> str:
    """UTC in the form scheduled actions take (the config requires aware datetimes)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GpuFleet(Construct):
    """One configured fleet; with ``training_security_group`` (a training fleet) its nodes carry that group too.

    Attributes: auto_scaling_group, launch_templates (layout -> template), placement_group (or None),
    launch_hook_name, terminate_hook_name."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fleet: Fleet,
        group_name: str,
        instance_types: Sequence[InstanceType],
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        machine_image: ec2.IMachineImage,
        user_data: ec2.UserData,
        instance_profile: iam.IInstanceProfile,
        node_security_group: ec2.ISecurityGroup,
        efa_security_group: ec2.ISecurityGroup,
        training_security_group: ec2.ISecurityGroup | None = None,
        volume_key: kms.IKey,
        notification_topic: sns.ITopic,
        metrics_namespace: str,
        placement_tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.launch_hook_name = launch_hook_name(group_name)
        self.terminate_hook_name = terminate_hook_name(group_name)
        # Capacity Blocks and warm pools need a plain launch template: no mixed-instances policy.
        single_template = fleet.capacity_block is not None or fleet.warm_pool is not None
        layouts = _efa_layouts(fleet, instance_types)
        self.launch_templates = templates = self._launch_templates(
            fleet,
            layouts,
            machine_image=machine_image,
            user_data=user_data,
            instance_profile=instance_profile,
            node_security_group=node_security_group,
            efa_security_group=efa_security_group,
            training_security_group=training_security_group,
            volume_key=volume_key,
            instance_type=instance_types[0].instance_type if single_template else None,
        )
        self.auto_scaling_group = self._auto_scaling_group(
            fleet,
            group_name,
            policy=None if single_template else mixed_instances_policy(fleet, instance_types, layouts, templates),
            vpc=vpc,
            subnets=subnets,
            topic=notification_topic,
        )
        cfn_group = cfn_child(self.auto_scaling_group, autoscaling.CfnAutoScalingGroup)
        self._acknowledge_template_checks(fleet)
        self.placement_group = placement_group(self, fleet, cfn_group, placement_tags)
        reserve_capacity(fleet, cfn_group)
        if fleet.capacity_block is not None:
            self._schedule_block(fleet.capacity_block, fleet.capacity.max)
        self._add_scaling(fleet, group_name, metrics_namespace)
        if fleet.warm_pool is not None:
            self._add_warm_pool(fleet.warm_pool)
        self._lifecycle_hooks(fleet, cfn_group)

    def _launch_templates(
        self,
        fleet: Fleet,
        layouts: Mapping[Layout, Sequence[InstanceType]],
        *,
        machine_image: ec2.IMachineImage,
        user_data: ec2.UserData,
        instance_profile: iam.IInstanceProfile,
        node_security_group: ec2.ISecurityGroup,
        efa_security_group: ec2.ISecurityGroup,
        training_security_group: ec2.ISecurityGroup | None,
        volume_key: kms.IKey,
        instance_type: str | None,
    ) -> dict[Layout, ec2.LaunchTemplate]:
        """One launch template per EFA interface layout, in preference order; ``instance_type`` for a single one."""
        block = fleet.capacity_block
        templates: dict[Layout, ec2.LaunchTemplate] = {}
        for cards, efa_only in layouts:
            suffix = f"EfaOnly{len(cards)}" if efa_only else f"Efa{len(cards)}" if cards else "Standard"
            templates[cards, efa_only] = FleetLaunchTemplate(
                self,
                f"Template{suffix}",
                machine_image=machine_image,
                user_data=user_data,
                instance_profile=instance_profile,
                node_security_group=node_security_group,
                efa_security_group=efa_security_group,
                training_security_group=training_security_group,
                efa_cards=cards,
                efa_only=efa_only,
                volumes=Volumes(root_gib=fleet.root_volume_gib, scratch_gib=fleet.scratch_volume_gib),
                volume_key=volume_key,
                containers=fleet.containers,
                capacity_block_id=block.id if block else None,
                instance_type=instance_type,
            ).launch_template
        return templates

    def _auto_scaling_group(
        self,
        fleet: Fleet,
        group_name: str,
        *,
        policy: autoscaling.MixedInstancesPolicy | None,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        topic: sns.ITopic,
    ) -> autoscaling.AutoScalingGroup:
        """The group, sized by config (outside a Capacity Block window: empty), on its mixed-instances ``policy``
        or, without one, on its one launch template."""
        block = fleet.capacity_block
        capacity: dict[str, Any]
        if policy is None:
            (template,) = self.launch_templates.values()
            capacity = {"launch_template": template}
        else:
            capacity = {"mixed_instances_policy": policy, "capacity_rebalance": fleet.uses_spot}
        return autoscaling.AutoScalingGroup(
            self,
            "Group",
            vpc=vpc,
            vpc_subnets=subnets,
            auto_scaling_group_name=group_name,
            # Outside a Capacity Block window the group holds nothing; scheduled actions size it.
            min_capacity=fleet.capacity.min if block is None else 0,
            max_capacity=fleet.capacity.max if block is None else 0,
            desired_capacity=(fleet.capacity.desired if fleet.capacity.desired is not None else fleet.capacity.min)
            if block is None
            else 0,
            health_checks=group_health_checks(served=fleet.service is not None),
            group_metrics=[autoscaling.GroupMetrics.all()],
            notifications=[
                autoscaling.NotificationConfiguration(topic=topic, scaling_events=autoscaling.ScalingEvents.ALL)
            ],
            **capacity,
        )

    def _schedule_block(self, block: CapacityBlock, size: int) -> None:
        """Scale to ``size`` a few minutes into the Capacity Block, to zero well before it ends."""
        autoscaling.CfnScheduledAction(
            self,
            "BlockStart",
            auto_scaling_group_name=self.auto_scaling_group.auto_scaling_group_name,
            start_time=_iso(block.start + BLOCK_START_DELAY),
            min_size=size,
            max_size=size,
            desired_capacity=size,
        )
        autoscaling.CfnScheduledAction(
            self,
            "BlockEnd",
            auto_scaling_group_name=self.auto_scaling_group.auto_scaling_group_name,
            start_time=_iso(block.end - BLOCK_END_MARGIN),
            min_size=0,
            max_size=0,
            desired_capacity=0,
        )

    def _add_warm_pool(self, warm_pool: WarmPool) -> None:
        """Stopped instances kept ready to join the group."""
        self.auto_scaling_group.add_warm_pool(
            min_size=warm_pool.min_size,
            max_group_prepared_capacity=warm_pool.max_prepared_capacity,
            pool_state=autoscaling.PoolState.STOPPED,
            reuse_on_scale_in=warm_pool.reuse_on_scale_in,
        )

    def _lifecycle_hooks(self, fleet: Fleet, cfn_group: autoscaling.CfnAutoScalingGroup) -> None:
        """The launch hook (the node's bootstrap) and the terminate hook (the job's checkpoint)."""
        # In the group itself, not AWS::AutoScaling::LifecycleHook resources: CreateAutoScalingGroup adds
        # these before it launches anything, so even the group's first instances wait in Pending:Wait.
        cfn_group.lifecycle_hook_specification_list = [
            autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty(
                lifecycle_hook_name=self.launch_hook_name,
                lifecycle_transition="autoscaling:EC2_INSTANCE_LAUNCHING",
                default_result="ABANDON",
                # The node's bootstrap (GPU check, Lustre mount with retries, agent) plus the fleet's DCGM
                # diagnostic level: Fleet.launch_hook_timeout_seconds (config/fleets/health.py).
                heartbeat_timeout=fleet.launch_hook_timeout_seconds,
            ),
            autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty(
                lifecycle_hook_name=self.terminate_hook_name,
                lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
                default_result="CONTINUE",
                heartbeat_timeout=int(TERMINATE_HOOK_TIMEOUT.to_seconds()),
            ),
        ]

    def _add_scaling(self, fleet: Fleet, group_name: str, namespace: str) -> None:
        """Dynamic scaling on the fleet's GPU utilization and scheduled actions, from config only:
        a fleet without ``scaling`` (training fleets by default) keeps its configured size."""
        scaling = fleet.scaling
        if scaling is None:
            return
        group = self.auto_scaling_group
        if scaling.target_tracking is not None:
            group.scale_to_track_metric(
                "GpuUtilizationTarget",
                metric=gpu_metric(namespace, group_name, "utilization_gpu", "Average", 1),
                target_value=scaling.target_tracking.gpu_utilization_percent,
            )
        if scaling.step is not None:
            add_step_scaling(group, scaling.step, namespace, group_name)
        for action in scaling.schedules:
            group.scale_on_schedule(
                f"Schedule-{action.name}",
                schedule=autoscaling.Schedule.expression(action.cron),
                time_zone=action.time_zone,
                min_capacity=action.min,
                max_capacity=action.max,
                desired_capacity=action.desired,
            )

    def _acknowledge_template_checks(self, fleet: Fleet) -> None:
        group = self.auto_scaling_group
        cfn_group = cfn_child(group, autoscaling.CfnAutoScalingGroup)
        acknowledge(
            cfn_group,
            "AwsSolutions-EC26",
            "Every launch template of this group encrypts its gp3 root and scratch volumes with the data key "
            "(FleetLaunchTemplate, asserted in tests); the rule cannot follow the template through the group.",
        )
        acknowledge(
            cfn_group,
            "NIST.800.53.R5-EC2IMDSv2Enabled",
            "Every launch template of this group sets HttpTokens=required (IMDSv2 only, asserted in tests); the "
            "rule looks for the setting on the group, not its templates.",
        )
        if fleet.capacity.desired is not None:
            acknowledge(
                group,
                "Annotation::@aws-cdk/aws-autoscaling:desiredCapacitySet",
                f"The fleet's desired capacity is config (fleets[{fleet.name}].capacity.desired): a deploy resets "
                "the group to the reviewed size on purpose; scaling policies move it between deploys.",
            )
