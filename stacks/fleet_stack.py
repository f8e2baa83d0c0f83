"""FleetStack: the node scripts and one PlatformFleet per configured fleet (alerts and node log groups: Security)."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from config import Environment
from config.fleets import Fleet, FleetRole, Scheduler
from config.naming import ResourceNames
from config.pipeline_schema import FabricCheckTrust, PipelineRoles, ami_gate_role_name, fabric_check_role_name
from gpu_constructs.fleet.ami_rollout import AmiRollout, FleetRollout, refresh_preferences
from gpu_constructs.fleet.job_document import JobDocument
from gpu_constructs.fleet.node_scripts import publish_node_scripts
from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from gpu_constructs.fleet.render.node_settings import NodeSite, node_agent_config_json
from gpu_constructs.platform_fleet.platform_fleet import FleetHandle, PlatformFleet
from gpu_constructs.platform_fleet.site import FleetSite, LustreMount, NodeNetwork, NodeSecurity
from gpu_constructs.scheduler.slurm_scheduler import PlatformGroups, SlurmScheduler
from gpu_constructs.security.ami_gate_role import AmiGateRole
from gpu_constructs.security.fabric_check_role import FabricCheckRole
from stacks.base import PlatformStack


class FleetStack(PlatformStack):
    """Attributes: ``fleets`` (name -> FleetHandle, in the order of the configuration), ``services`` (name -> the
    load balancer of a served fleet), ``ami_rollout`` (the runbook that refreshes the fleets onto a new AMI; None if
    no fleet is rolled), ``job_document`` (the SSM document training jobs run through; None without a training
    fleet of its own), ``fabric_check_role`` and ``ami_gate_role`` (the roles the pipeline's fabric check and AMI
    gate assume; None unless ``pipeline_roles`` has them), ``scheduler`` (Slurm on AWS PCS for the ``scheduler:
    slurm`` fleets, which get no Auto Scaling group: PCS launches their nodes; None without such a fleet).

    Each fleet is one PlatformFleet (gpu_constructs/platform_fleet/) built on the environment's FleetSite. The
    alerts topic and the node log groups (one per ``NODE_LOGS`` entry, same names) come from the security stack,
    which outlives this one."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env: Environment,
        network: NodeNetwork,
        security: NodeSecurity,
        lustre: LustreMount,
        pipeline_roles: PipelineRoles,
    ) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=False, description=f"GPU platform {env.name}: GPU fleets"
        )
        if sorted(security.node_log_groups) != sorted(NODE_LOGS):
            raise ValueError(
                f"node log groups {sorted(security.node_log_groups)} do not match NODE_LOGS {sorted(NODE_LOGS)}"
            )
        names = ResourceNames.of(env)
        self._env, self._names = env, names
        self.site = FleetSite(
            env=env,
            names=names,
            network=network,
            security=security,
            machine_image=ec2.MachineImage.from_ssm_parameter(names.ami_parameter),
            scripts=publish_node_scripts(self, node_role=security.node_role),
            node_site=NodeSite(names=names, fsx_dns_name=lustre.dns_name, fsx_mount_name=lustre.mount_name),
            agent_config_json=node_agent_config_json(names),
        )
        # The Auto Scaling fleets first, then the Slurm scheduler and its fleets: the order the templates have kept.
        handles = {
            f.name: PlatformFleet(self, f, site=self.site).handle for f in env.fleets if f.scheduler is Scheduler.NONE
        }
        self.scheduler = self._slurm_scheduler()
        if self.scheduler is not None:
            cluster = self.scheduler.fleet_cluster
            for fleet in (f for f in env.fleets if f.scheduler is Scheduler.SLURM):
                handles[fleet.name] = PlatformFleet(self.scheduler, fleet, site=self.site, cluster=cluster).handle
        self.fleets: dict[str, FleetHandle] = {f.name: handles[f.name] for f in env.fleets}
        self.services = {name: f.service for name, f in self.fleets.items() if f.service is not None}
        self.ami_rollout = self._ami_rollout(env, names, security.node_role)
        # Training jobs run through this document (``gpu-platform job``); only where a fleet trains on its own.
        asg_training = [f for f in env.fleets if f.role is FleetRole.TRAINING and f.scheduler is Scheduler.NONE]
        self.job_document = self._job_document() if asg_training else None
        fabric, gate = pipeline_roles.fabric_check, pipeline_roles.ami_gate
        self.fabric_check_role = None if fabric is None else self._fabric_check_role(fabric, asg_training)
        self.ami_gate_role = None if gate is None else self._ami_gate_role(gate)

    def _slurm_scheduler(self) -> SlurmScheduler | None:
        """Slurm on AWS PCS where a fleet sets ``scheduler: slurm``: the controller in the GPU subnet of the
        environment's first zone, whatever the fleets (a cluster's Networking is create-only: a controller that
        followed a fleet's zones would replace the cluster, its queues, node groups and accounting, on a fleet
        edit); its login nodes wait for what a node needs at boot."""
        env, site = self._env, self.site
        if not any(f.scheduler is Scheduler.SLURM for f in env.fleets):
            return None
        profiles, training = site.security.slurm_profiles, site.network.training
        if env.slurm is None or profiles is None or training is None:
            raise ValueError(f"{env.name}: Slurm fleets need the slurm section, PCS profiles and training group")
        network = site.network
        return SlurmScheduler(
            self,
            "Slurm",
            env_name=env.name,
            slurm=env.slurm,
            controller_subnet_id=network.subnet_ids([env.availability_zones[0]])[0],
            vpc=network.vpc,
            machine_image=site.machine_image,
            groups=PlatformGroups(network.node, network.efa, training),
            profiles=profiles,
            volume_key=site.security.volume_key,
            launch_after=site.launch_after,
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
                launch_template_ids=list(self.fleets[fleet.name].launch_template_ids),
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
