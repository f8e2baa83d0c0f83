"""FleetStack: the node scripts and one GpuFleet per configured fleet (alerts and node log groups: Security)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from constructs import Construct

from config import Environment
from config.catalog import get_instance_type
from config.naming import ResourceNames
from gpu_constructs.ami_rollout import AmiRollout, FleetRollout, refresh_preferences
from gpu_constructs.cloudwatch_agent import NodeLogFile, agent_config, to_json
from gpu_constructs.gpu_fleet import GpuFleet
from gpu_constructs.node_logs import NODE_LOGS
from gpu_constructs.node_user_data import NodeScripts, render_user_data
from gpu_constructs.platform_vpc import GPU_SUBNET_GROUP
from stacks.base import PlatformStack

NODE_SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "node"
FSX_MOUNT_POINT = "/fsx"


class FleetStack(PlatformStack):
    """Attributes: ``fleets`` (name -> GpuFleet), ``ami_rollout`` (the runbook that refreshes the fleets onto a
    new AMI; None if no fleet is rolled).

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
        node_role: iam.IRole,
        instance_profile: iam.IInstanceProfile,
        volume_key: kms.IKey,
        alerts_topic: sns.ITopic,
        node_log_groups: Mapping[str, logs.ILogGroup],
        fsx_dns_name: str,
        fsx_mount_name: str,
    ) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=False, description=f"GPU platform {env.name}: GPU fleets"
        )
        names = ResourceNames.of(env)

        scripts = s3_assets.Asset(
            self, "NodeScripts", path=str(NODE_SCRIPTS), exclude=["__pycache__", "*.pyc", "README.md"]
        )
        scripts_read = iam.ManagedPolicy(
            self,
            "NodeScriptsRead",
            description="GPU nodes read the node scripts of this stack's asset",
            roles=[node_role],
            statements=[
                iam.PolicyStatement(
                    actions=["s3:GetObject"],
                    resources=[f"arn:{self.partition}:s3:::{scripts.s3_bucket_name}/{scripts.s3_object_key}"],
                )
            ],
        )
        if sorted(node_log_groups) != sorted(NODE_LOGS):
            raise ValueError(f"node log groups {sorted(node_log_groups)} do not match NODE_LOGS {sorted(NODE_LOGS)}")
        self.node_log_groups = dict(node_log_groups)
        agent = to_json(
            agent_config(
                namespace=names.metrics_namespace,
                log_files=[NodeLogFile(name, path, names.node_log_group(name)) for name, path in NODE_LOGS.items()],
            )
        )
        machine_image = ec2.MachineImage.from_ssm_parameter(names.ami_parameter)
        self.alerts_topic = alerts_topic

        self.fleets: dict[str, GpuFleet] = {}
        for fleet in env.fleets:
            catalog = [get_instance_type(name) for name in fleet.instance_types]
            group_name = names.asg_name(fleet.name)
            user_data = ec2.UserData.for_linux()
            user_data.add_commands(
                *render_user_data(
                    region=env.region,
                    node_env={
                        "GPU_PLATFORM_ENV": env.name,
                        "AWS_REGION": env.region,
                        "FLEET_NAME": fleet.name,
                        "ASG_NAME": group_name,
                        "LAUNCH_HOOK_NAME": f"{group_name}-launch",
                        "TERMINATE_HOOK_NAME": f"{group_name}-terminate",
                        "METRIC_NAMESPACE": names.metrics_namespace,
                        "FSX_DNS_NAME": fsx_dns_name,
                        "FSX_MOUNT_NAME": fsx_mount_name,
                        "FSX_MOUNT_POINT": FSX_MOUNT_POINT,
                        # The checkpoint contract (scripts/node/README.md): a job puts <job>.pid in
                        # TRAINING_PID_DIR (the watcher units create it) and checkpoints on SIGUSR1
                        # under CHECKPOINT_DIR/<job>/.
                        "CHECKPOINT_DIR": f"{FSX_MOUNT_POINT}/checkpoints",
                        "TRAINING_PID_DIR": "/run/gpu-platform/jobs",
                        "EFA_ENABLED": str(fleet.efa).lower(),
                        "CONTAINERS_ENABLED": str(fleet.containers).lower(),
                    },
                    instance_types={
                        item.instance_type: {
                            "gpus": item.gpu_count,
                            "efa_interfaces": item.max_efa_interfaces if fleet.efa else 0,
                            "gpudirect_rdma": item.gpudirect_rdma and fleet.efa,
                        }
                        for item in catalog
                    },
                    agent_config_json=agent,
                    scripts=NodeScripts(bucket_name=scripts.s3_bucket_name, object_key=scripts.s3_object_key),
                    every_boot=fleet.warm_pool is not None,
                )
            )
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
                volume_key=volume_key,
                notification_topic=self.alerts_topic,
                metrics_namespace=names.metrics_namespace,
            )
            for log_group in self.node_log_groups.values():
                gpu_fleet.auto_scaling_group.node.add_dependency(log_group)  # the agent cannot create log groups
            # No node launches before it can fetch its scripts.
            gpu_fleet.auto_scaling_group.node.add_dependency(scripts_read)
            self.fleets[fleet.name] = gpu_fleet

        self.ami_rollout = self._ami_rollout(env, names, node_role)

    def _ami_rollout(self, env: Environment, names: ResourceNames, node_role: iam.IRole) -> AmiRollout | None:
        """Every fleet with a rollout (not Capacity Block fleets, not ``refresh.enabled: false``), refreshed
        with its preferences and, as rollback alarms, its own alarms of the monitoring stack (by name)."""
        rollouts = [
            FleetRollout(
                fleet_name=fleet.name,
                group_name=names.asg_name(fleet.name),
                launch_template_ids=[t.launch_template_id for t in self.fleets[fleet.name].launch_templates.values()],
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
