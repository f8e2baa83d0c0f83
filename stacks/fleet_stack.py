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
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from config import Environment
from config.catalog import InstanceType, get_instance_type
from config.fleets import Fleet, FleetRole, Scheduler, Service
from config.loader import CONFIG_DIR
from config.naming import ResourceNames
from config.pipeline_schema import (
    FabricCheckTrust,
    ami_gate_role_name,
    ami_gate_trust,
    fabric_check_role_name,
    fabric_check_trust,
)
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.fleet.ami_rollout import AmiRollout, FleetRollout, refresh_preferences
from gpu_constructs.fleet.gpu_fleet import GpuFleet
from gpu_constructs.fleet.job_document import JobDocument
from gpu_constructs.fleet.node_scripts import publish_node_scripts
from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from gpu_constructs.fleet.render.node_settings import NodeSite, node_agent_config_json
from gpu_constructs.fleet.service_load_balancer import ServiceLoadBalancer
from gpu_constructs.network.platform_vpc import GPU_SUBNET_GROUP
from gpu_constructs.scheduler.slurm_scheduler import PlatformGroups, SlurmFleetSpec, SlurmProfiles, SlurmScheduler
from gpu_constructs.security.ami_gate_role import AmiGateRole
from gpu_constructs.security.fabric_check_role import FabricCheckRole
from stacks.base import PlatformStack
from stacks.fleet_user_data import fleet_user_data


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
        if sorted(node_log_groups) != sorted(NODE_LOGS):
            raise ValueError(f"node log groups {sorted(node_log_groups)} do not match NODE_LOGS {sorted(NODE_LOGS)}")
        self._env, self._names, self._vpc = env, names, vpc
        self._node_security_group, self._efa_security_group = node_security_group, efa_security_group
        self._training_security_group = training_security_group
        self._instance_profile, self._volume_key = instance_profile, volume_key
        self._access_log_bucket = access_log_bucket
        self._scripts = publish_node_scripts(self, node_role=node_role)
        self.node_log_groups = dict(node_log_groups)
        self._site = NodeSite(names=names, fsx_dns_name=fsx_dns_name, fsx_mount_name=fsx_mount_name)
        self._agent = node_agent_config_json(names)
        self._machine_image = ec2.MachineImage.from_ssm_parameter(names.ami_parameter)
        self.alerts_topic = alerts_topic

        self.fleets: dict[str, GpuFleet] = {}
        self.services: dict[str, ServiceLoadBalancer] = {}  # fleet name -> its load balancer (served fleets)
        slurm_fleets = self._add_fleets()
        self.scheduler = self._slurm_scheduler(slurm_fleets, slurm_profiles) if slurm_fleets else None
        self.ami_rollout = self._ami_rollout(env, names, node_role)
        # Training jobs run through this document (``gpu-platform job``); only where a fleet trains on its own.
        asg_training = [f for f in env.fleets if f.role is FleetRole.TRAINING and f.scheduler is Scheduler.NONE]
        self.job_document = self._job_document() if asg_training else None
        self.fabric_check_role = None if trust is None else self._fabric_check_role(trust, asg_training)
        self.ami_gate_role = None if gate_trust is None else self._ami_gate_role(gate_trust)

    def _add_fleets(self) -> list[SlurmFleetSpec]:
        """Each fleet's user data, then its GpuFleet and the load balancer of its service; the Slurm fleets'
        specs (PCS launches their nodes: gpu_constructs/scheduler/), in the order of the configuration."""
        slurm_fleets: list[SlurmFleetSpec] = []
        for fleet in self._env.fleets:
            catalog = [get_instance_type(name) for name in fleet.instance_types]
            user_data = fleet_user_data(
                self._env, self._site, fleet, catalog, agent_config_json=self._agent, scripts=self._scripts.location
            )
            if fleet.scheduler is Scheduler.SLURM:
                slurm_fleets.append(SlurmFleetSpec(fleet=fleet, instance_types=catalog, user_data=user_data))
                continue
            gpu_fleet = self._gpu_fleet(fleet, catalog, user_data)
            if fleet.service is not None:  # the load balancer in front of an inference fleet's service
                self._service(fleet, fleet.service, gpu_fleet)
        return slurm_fleets

    def _gpu_fleet(self, fleet: Fleet, catalog: list[InstanceType], user_data: ec2.UserData) -> GpuFleet:
        """The fleet's Auto Scaling group (launched after its scripts and log groups) and its group's output."""
        gpu_fleet = GpuFleet(
            self,
            f"Fleet-{fleet.name}",
            fleet=fleet,
            group_name=self._names.asg_name(fleet.name),
            instance_types=catalog,
            vpc=self._vpc,
            subnets=ec2.SubnetSelection(
                subnet_group_name=GPU_SUBNET_GROUP, availability_zones=list(fleet.availability_zones)
            ),
            machine_image=self._machine_image,
            user_data=user_data,
            instance_profile=self._instance_profile,
            node_security_group=self._node_security_group,
            efa_security_group=self._efa_security_group,
            training_security_group=_training_group(fleet, self._training_security_group),
            volume_key=self._volume_key,
            notification_topic=self.alerts_topic,
            metrics_namespace=self._names.metrics_namespace,
            placement_tags=self._env.pinned_placement_group_tags,
        )
        for log_group in self.node_log_groups.values():
            gpu_fleet.auto_scaling_group.node.add_dependency(log_group)  # the agent cannot create log groups
        # No node launches before it can fetch its scripts.
        gpu_fleet.auto_scaling_group.node.add_dependency(self._scripts.read_policy)
        self.fleets[fleet.name] = gpu_fleet
        self._output(
            f"GroupName{_output_id(fleet)}",
            gpu_fleet.auto_scaling_group.auto_scaling_group_name,
            f"Auto Scaling group of the {fleet.name} fleet",
        )
        return gpu_fleet

    def _service(self, fleet: Fleet, service: Service, gpu_fleet: GpuFleet) -> None:
        """The load balancer in front of the fleet's service, and its URL's output."""
        self.services[fleet.name] = ServiceLoadBalancer(
            self,
            f"Service-{fleet.name}",
            fleet_name=fleet.name,
            service=service,
            vpc=self._vpc,
            auto_scaling_group=gpu_fleet.auto_scaling_group,
            node_security_group=self._node_security_group,
            access_log_bucket=self._access_log_bucket,
            access_log_prefix=f"load-balancers/{fleet.name}",
        )
        self._output(
            f"ServiceUrl{_output_id(fleet)}", self.services[fleet.name].url, f"URL of the {fleet.name} fleet's service"
        )

    def _output(self, output_id: str, value: str, what: str) -> None:
        """The stack output ``output_id``: ``what``, in this environment."""
        CfnOutput(self, output_id, value=value, description=f"GPU platform {self._env.name}: {what}")

    def _slurm_scheduler(self, slurm_fleets: list[SlurmFleetSpec], profiles: SlurmProfiles | None) -> SlurmScheduler:
        """Slurm on AWS PCS for the ``scheduler: slurm`` fleets; their node groups wait for what a node needs."""
        env, training = self._env, self._training_security_group
        if env.slurm is None or profiles is None or training is None:
            raise ValueError(f"{env.name}: Slurm fleets need the slurm section, PCS profiles and training group")
        return SlurmScheduler(
            self,
            "Slurm",
            env_name=env.name,
            slurm=env.slurm,
            fleets=slurm_fleets,
            vpc=self._vpc,
            subnet_group_name=GPU_SUBNET_GROUP,
            machine_image=self._machine_image,
            groups=PlatformGroups(self._node_security_group, self._efa_security_group, training),
            profiles=profiles,
            volume_key=self._volume_key,
            placement_tags=env.pinned_placement_group_tags,
            launch_after=[self._scripts.read_policy, *self.node_log_groups.values()],
        )

    def _job_document(self) -> ssm.CfnDocument:
        """The SSM document training jobs run through (``gpu-platform job``)."""
        jobs = self._env.jobs
        return JobDocument(
            self,
            "Jobs",
            document_name=self._names.job_document,
            rendezvous_port=jobs.rendezvous_port,
            max_restarts=jobs.max_restarts,
        ).document

    def _fabric_check_role(self, trust: FabricCheckTrust, asg_training: list[Fleet]) -> iam.Role:
        """The role the pipeline's fabric check assumes, where config/pipeline/pipeline.yaml asks for it."""
        names = self._names
        return FabricCheckRole(
            self,
            "FabricCheck",
            role_name=fabric_check_role_name(self._env.name),
            trusted_account=trust.account,
            trusted_role_name=trust.role_name,
            job_document_name=names.job_document,
            group_names=[names.asg_name(f.name) for f in asg_training],
            job_log_group_name=names.job_log_group,
            metrics_namespace=names.metrics_namespace,
        ).role

    def _ami_gate_role(self, trust: FabricCheckTrust) -> iam.Role:
        """The role the pipeline's AMI gate assumes before it deploys the environment, where pipeline.yaml asks."""
        return AmiGateRole(
            self,
            "AmiGate",
            role_name=ami_gate_role_name(self._env.name),
            trusted_account=trust.account,
            trusted_role_name=trust.role_name,
            parameter_name=self._names.ami_parameter,
        ).role

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


def _output_id(fleet: Fleet) -> str:
    """The fleet's name as an output id's suffix: title case, letters and digits only."""
    return re.sub("[^A-Za-z0-9]", "", fleet.name.title())


def _training_group(fleet: Fleet, group: ec2.ISecurityGroup | None) -> ec2.ISecurityGroup | None:
    """The training group for a training fleet (the Network stack makes one where a fleet trains), else None."""
    if fleet.role is not FleetRole.TRAINING:
        return None
    if group is None:
        raise ValueError(f"fleet {fleet.name} trains but the network has no training security group")
    return group
