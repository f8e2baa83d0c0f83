"""FleetStack: the node scripts and one GpuFleet per configured fleet (alerts and node log groups: Security)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from aws_cdk import CfnOutput
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from config import Environment
from config.catalog import get_instance_type
from config.fleets import Fleet, FleetRole, Scheduler
from config.identity import file_system_identity
from config.loader import CONFIG_DIR
from config.naming import ResourceNames
from config.pipeline_schema import ami_gate_role_name, ami_gate_trust, fabric_check_role_name, fabric_check_trust
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.fleet.ami_rollout import AmiRollout, FleetRollout, refresh_preferences
from gpu_constructs.fleet.gpu_fleet import GpuFleet
from gpu_constructs.fleet.job_document import JobDocument
from gpu_constructs.fleet.node_scripts import publish_node_scripts
from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from gpu_constructs.fleet.render.node_settings import (
    NodeSite,
    instance_type_facts,
    node_agent_config_json,
    node_env,
    service_json,
)
from gpu_constructs.fleet.render.user_data import render_user_data
from gpu_constructs.fleet.service_load_balancer import ServiceLoadBalancer
from gpu_constructs.network.platform_vpc import GPU_SUBNET_GROUP
from gpu_constructs.scheduler.slurm_scheduler import PlatformGroups, SlurmFleetSpec, SlurmProfiles, SlurmScheduler
from gpu_constructs.security.ami_gate_role import AmiGateRole
from gpu_constructs.security.fabric_check_role import FabricCheckRole
from stacks.base import PlatformStack


class FleetStack(PlatformStack):
    """Attributes: ``fleets`` (name -> GpuFleet), ``ami_rollout`` (the runbook that refreshes the fleets onto a
    new AMI; None if no fleet is rolled), ``job_document`` (the SSM document training jobs run through; None
    without a training fleet), ``fabric_check_role`` (the role the pipeline's fabric check assumes; None unless
    ``fabric_check`` of config/pipeline/pipeline.yaml lists the environment), ``ami_gate_role`` (the role the
    pipeline's AMI gate assumes before it deploys the environment; None unless ``ami_gate`` lists it),
    ``scheduler`` (Slurm on AWS PCS for the ``scheduler: slurm`` fleets, which get no Auto Scaling group: PCS
    launches their nodes; None without such a fleet).

    The alerts topic and the node log groups (one per ``NODE_LOGS`` entry, same names) come from the
    security stack, which outlives this one."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env: Environment,
        vpc: ec2.IVpc,
        node_security_group: ec2.ISecurityGroup,
        efa_security_group: ec2.ISecurityGroup,
        training_security_group: ec2.ISecurityGroup | None,
        node_role: iam.IRole,
        instance_profile: iam.IInstanceProfile,
        volume_key: kms.IKey,
        alerts_topic: sns.ITopic,
        node_log_groups: Mapping[str, logs.ILogGroup],
        fsx_dns_name: str,
        fsx_mount_name: str,
        access_log_bucket: s3.IBucket,
        slurm_profiles: SlurmProfiles | None = None,
    ) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=False, description=f"GPU platform {env.name}: GPU fleets"
        )
        names = ResourceNames.of(env)
        context_dir = self.node.try_get_context("config_dir")  # as app.py reads it; checked before any fleet
        config_dir = Path(context_dir) if context_dir else CONFIG_DIR
        trust = fabric_check_trust(env, config_dir)
        gate_trust = ami_gate_trust(env, config_dir)
        scripts = publish_node_scripts(self, node_role=node_role)
        if sorted(node_log_groups) != sorted(NODE_LOGS):
            raise ValueError(f"node log groups {sorted(node_log_groups)} do not match NODE_LOGS {sorted(NODE_LOGS)}")
        self.node_log_groups = dict(node_log_groups)
        site = NodeSite(names=names, fsx_dns_name=fsx_dns_name, fsx_mount_name=fsx_mount_name)
        agent = node_agent_config_json(names)
        machine_image = ec2.MachineImage.from_ssm_parameter(names.ami_parameter)
        self.alerts_topic = alerts_topic

        self.fleets: dict[str, GpuFleet] = {}
        self.services: dict[str, ServiceLoadBalancer] = {}  # fleet name -> its load balancer (served fleets)
        slurm_fleets: list[SlurmFleetSpec] = []
        for fleet in env.fleets:
            catalog = [get_instance_type(name) for name in fleet.instance_types]
            group_name = names.asg_name(fleet.name)
            user_data = ec2.UserData.for_linux()
            # The file system comes from the Storage stack's output: its identity here makes a replacement of it
            # a new launch template version in the same deploy (config/identity.py).
            user_data.add_commands(
                *reading_file_system(
                    file_system_identity(env),
                    render_user_data(
                        region=env.region,
                        node_env=node_env(site, fleet),
                        instance_types=instance_type_facts(fleet, catalog),
                        agent_config_json=agent,
                        scripts=scripts.location,
                        service_json=service_json(fleet),
                        every_boot=fleet.warm_pool is not None,
                    ),
                )
            )
            if fleet.scheduler is Scheduler.SLURM:  # PCS launches these nodes (gpu_constructs/scheduler/)
                slurm_fleets.append(SlurmFleetSpec(fleet=fleet, instance_types=catalog, user_data=user_data))
                continue
            gpu_fleet = GpuFleet(
                self,
                f"Fleet-{fleet.name}",
                fleet=fleet,
                group_name=group_name,
                instance_types=catalog,
                vpc=vpc,
                subnets=ec2.SubnetSelection(
                    subnet_group_name=GPU_SUBNET_GROUP, availability_zones=list(fleet.availability_zones)
                ),
                machine_image=machine_image,
                user_data=user_data,
                instance_profile=instance_profile,
                node_security_group=node_security_group,
                efa_security_group=efa_security_group,
                training_security_group=_training_group(fleet, training_security_group),
                volume_key=volume_key,
                notification_topic=self.alerts_topic,
                metrics_namespace=names.metrics_namespace,
                placement_tags=env.pinned_placement_group_tags,
            )
            for log_group in self.node_log_groups.values():
                gpu_fleet.auto_scaling_group.node.add_dependency(log_group)  # the agent cannot create log groups
            # No node launches before it can fetch its scripts.
            gpu_fleet.auto_scaling_group.node.add_dependency(scripts.read_policy)
            self.fleets[fleet.name] = gpu_fleet
            output_id = re.sub("[^A-Za-z0-9]", "", fleet.name.title())
            CfnOutput(
                self,
                f"GroupName{output_id}",
                value=gpu_fleet.auto_scaling_group.auto_scaling_group_name,
                description=f"GPU platform {env.name}: Auto Scaling group of the {fleet.name} fleet",
            )

            if fleet.service is not None:  # the load balancer in front of an inference fleet's service
                self.services[fleet.name] = ServiceLoadBalancer(
                    self,
                    f"Service-{fleet.name}",
                    fleet_name=fleet.name,
                    service=fleet.service,
                    vpc=vpc,
                    auto_scaling_group=gpu_fleet.auto_scaling_group,
                    node_security_group=node_security_group,
                    access_log_bucket=access_log_bucket,
                    access_log_prefix=f"load-balancers/{fleet.name}",
                )
                CfnOutput(
                    self,
                    f"ServiceUrl{output_id}",
                    value=self.services[fleet.name].url,
                    description=f"GPU platform {env.name}: URL of the {fleet.name} fleet's service",
                )

        self.scheduler = None
        if slurm_fleets:
            if env.slurm is None or slurm_profiles is None or training_security_group is None:
                raise ValueError(f"{env.name}: Slurm fleets need the slurm section, PCS profiles and training group")
            self.scheduler = SlurmScheduler(
                self,
                "Slurm",
                env_name=env.name,
                slurm=env.slurm,
                fleets=slurm_fleets,
                vpc=vpc,
                subnet_group_name=GPU_SUBNET_GROUP,
                machine_image=machine_image,
                groups=PlatformGroups(node_security_group, efa_security_group, training_security_group),
                profiles=slurm_profiles,
                volume_key=volume_key,
                placement_tags=env.pinned_placement_group_tags,
                launch_after=[scripts.read_policy, *self.node_log_groups.values()],
            )
        self.ami_rollout = self._ami_rollout(env, names, node_role)
        # Training jobs run through this document (``gpu-platform job``); only where a fleet trains on its own.
        asg_training = [f for f in env.fleets if f.role is FleetRole.TRAINING and f.scheduler is Scheduler.NONE]
        self.job_document = None
        if asg_training:
            jobs = env.jobs
            self.job_document = JobDocument(
                self,
                "Jobs",
                document_name=names.job_document,
                rendezvous_port=jobs.rendezvous_port,
                max_restarts=jobs.max_restarts,
            ).document
        # The role the pipeline's fabric check assumes, where config/pipeline/pipeline.yaml asks for it.
        self.fabric_check_role = (
            None
            if trust is None
            else FabricCheckRole(
                self,
                "FabricCheck",
                role_name=fabric_check_role_name(env.name),
                trusted_account=trust.account,
                trusted_role_name=trust.role_name,
                job_document_name=names.job_document,
                group_names=[names.asg_name(f.name) for f in asg_training],
                job_log_group_name=names.job_log_group,
                metrics_namespace=names.metrics_namespace,
            ).role
        )
        # The role the pipeline's AMI gate assumes before it deploys the environment, where pipeline.yaml asks.
        self.ami_gate_role = (
            None
            if gate_trust is None
            else AmiGateRole(
                self,
                "AmiGate",
                role_name=ami_gate_role_name(env.name),
                trusted_account=gate_trust.account,
                trusted_role_name=gate_trust.role_name,
                parameter_name=names.ami_parameter,
            ).role
        )

    def _ami_rollout(self, env: Environment, names: ResourceNames, node_role: iam.IRole) -> AmiRollout | None:
        """Every fleet with a rollout (not Capacity Block fleets, not ``refresh.enabled: false``), refreshed
        with its preferences and, as rollback alarms, its own alarms of the monitoring stack (by name)."""
        rollouts = [
            FleetRollout(
                fleet_name=fleet.name,
                group_name=names.asg_name(fleet.name),
                launch_template_ids=[
                    cfn_child(t, ec2.CfnLaunchTemplate).ref for t in self.fleets[fleet.name].launch_templates.values()
                ],
                preferences=refresh_preferences(
                    fleet.rollout,
                    [names.fleet_alarm(fleet.name, alarm.value) for alarm in fleet.rollout.rollback_alarms],
                ),
            )
            for fleet in env.fleets
            if fleet.rollout is not None
        ]
        if not rollouts:
            return None
        return AmiRollout(
            self,
            "AmiRollout",
            document_name=names.ami_rollout_document,
            role_name=names.ami_rollout_role,
            rule_name=names.ami_rollout_rule,
            parameter_name=names.ami_parameter,
            fleets=rollouts,
            node_role_arn=node_role.role_arn,
        )


def _training_group(fleet: Fleet, group: ec2.ISecurityGroup | None) -> ec2.ISecurityGroup | None:
    """The training group for a training fleet (the Network stack makes one where a fleet trains), else None."""
    if fleet.role is not FleetRole.TRAINING:
        return None
    if group is None:
        raise ValueError(f"fleet {fleet.name} trains but the network has no training security group")
    return group


def reading_file_system(identity: str, lines: list[str]) -> list[str]:
    """``lines`` with a comment naming the file system's identity after the first one (``set -euo pipefail``)."""
    return [lines[0], f"# reads the Lustre file system {identity}", *lines[1:]]
