"""PlatformStage: every stack of one environment (each tagged by PlatformStack), in one cloud assembly."""

from __future__ import annotations

from aws_cdk import Environment as AwsEnvironment
from aws_cdk import Stage
from aws_cdk import aws_iam as iam
from constructs import Construct

from config import Environment, ImageSharing
from config.pipeline_schema import PipelineRoles
from gpu_constructs.fleet.render.node_logs import NODE_LOGS
from gpu_constructs.platform_fleet.site import LustreMount
from stacks.fleet_stack import FleetStack
from stacks.image_stack import ImageStack
from stacks.monitoring_stack import MonitoringStack
from stacks.network_stack import NetworkStack
from stacks.security_stack import SecurityStack
from stacks.storage_stack import StorageStack


class PlatformStage(Stage):
    """One environment of the platform (``cdk.out/assembly-<env>/``)."""

    def __init__(
        self,
        scope: Construct,
        *,
        env: Environment,
        image_sharing: ImageSharing,
        pipeline_roles: PipelineRoles,
    ) -> None:
        """``pipeline_roles``: the roles of this environment that pipeline steps assume (config/pipeline_schema.py
        ``pipeline_roles``, resolved before synth; ``PipelineRoles()`` for none)."""
        super().__init__(scope, env.name, env=AwsEnvironment(account=env.account, region=env.region))
        self.security = SecurityStack(self, "Security", env=env, node_logs=list(NODE_LOGS))
        self.network = NetworkStack(self, "Network", env=env, logs_key=self.security.logs_key)
        self.storage = StorageStack(
            self,
            "Storage",
            env=env,
            vpc=self.network.vpc,
            node_security_group=self.network.node_security_group,
            data_key=self.security.data_key,
            access_log_bucket=self.security.access_log_bucket,
        )
        self.image = ImageStack(
            self,
            "Image",
            env=env,
            sharing=image_sharing,
            vpc=self.network.vpc,
            builder_subnets=self.network.gpu_subnets,
            logs_key=self.security.logs_key,
            data_key=self.security.data_key,
            access_log_bucket=self.security.access_log_bucket,
            alerts_topic=self.security.alerts_topic,
        )
        self.fleets = FleetStack(
            self,
            "Fleets",
            env=env,
            network=self.network.node_network,
            security=self.security.node_security,
            lustre=LustreMount(self.storage.lustre.file_system.dns_name, self.storage.lustre.file_system.mount_name),
            pipeline_roles=pipeline_roles,
        )
        self.fleets.add_stack_dependency(self.image, "the fleets resolve the AMI parameter the image stack writes")
        self.monitoring = MonitoringStack(
            self,
            "Monitoring",
            env=env,
            topic=self.security.alerts_topic,
            file_system_id=self.storage.lustre.file_system.file_system_id,
            trail_log_group=self.security.audit.log_group,
            services=self.fleets.services,
        )
        # Every role of the environment, in every stack, carries the boundary.
        iam.PermissionsBoundary.of(self).apply(self.security.boundary)
