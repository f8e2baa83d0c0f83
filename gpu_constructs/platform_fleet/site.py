"""What every fleet of one environment shares, gathered once before any fleet is built: the fleet stack's typed
inputs (from the network, security and storage stacks) and the site its fleets are built on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import IConstruct

from config import Environment
from config.fleets import Fleet, FleetRole
from config.naming import ResourceNames
from gpu_constructs.fleet.node_scripts import PublishedNodeScripts
from gpu_constructs.fleet.render.node_settings import NodeSite
from gpu_constructs.network.platform_vpc import GPU_SUBNET_GROUP
from gpu_constructs.scheduler.slurm_scheduler import SlurmProfiles


@dataclass(frozen=True)
class NodeNetwork:
    """The VPC and the security groups every GPU node carries (network stack); ``training`` exists where a fleet
    trains."""

    vpc: ec2.IVpc
    node: ec2.ISecurityGroup
    efa: ec2.ISecurityGroup
    training: ec2.ISecurityGroup | None

    def subnets(self, fleet: Fleet) -> ec2.SubnetSelection:
        """The GPU subnets of the fleet's zones."""
        return ec2.SubnetSelection(
            subnet_group_name=GPU_SUBNET_GROUP, availability_zones=list(fleet.availability_zones)
        )

    def subnet_ids(self, zones: list[str]) -> list[str]:
        """The ids of the GPU subnets of ``zones``."""
        return self.vpc.select_subnets(subnet_group_name=GPU_SUBNET_GROUP, availability_zones=zones).subnet_ids

    def training_group(self, fleet: Fleet) -> ec2.ISecurityGroup | None:
        """The training group for a training fleet, else None; a training fleet without one is a wiring mistake."""
        if fleet.role is not FleetRole.TRAINING:
            return None
        if self.training is None:
            raise ValueError(f"fleet {fleet.name} trains but the network has no training security group")
        return self.training


@dataclass(frozen=True)
class NodeSecurity:
    """What the security stack gives the nodes: their role and instance profile (and PCS's profiles with a
    ``slurm`` section), the key of their volumes, the alerts topic, the node log groups (one per ``NODE_LOGS``
    entry), the bucket of the load balancers' access logs."""

    node_role: iam.IRole
    instance_profile: iam.IInstanceProfile
    volume_key: kms.IKey
    alerts_topic: sns.ITopic
    node_log_groups: Mapping[str, logs.ILogGroup]
    access_log_bucket: s3.IBucket
    slurm_profiles: SlurmProfiles | None = None


@dataclass(frozen=True)
class LustreMount:
    """The file system every node mounts at boot (storage stack; CDK tokens)."""

    dns_name: str
    mount_name: str


@dataclass(frozen=True)
class FleetSite:
    """Everything a fleet is built with besides its own config: the environment, its names, network and
    security, the AMI parameter's image, the published node scripts, the nodes' settings and agent config."""

    env: Environment
    names: ResourceNames
    network: NodeNetwork
    security: NodeSecurity
    machine_image: ec2.IMachineImage
    scripts: PublishedNodeScripts
    node_site: NodeSite
    agent_config_json: str

    @property
    def launch_after(self) -> list[IConstruct]:
        """What a node needs before it launches: the read policy of its scripts and the node log groups (the
        agent cannot create them)."""
        return [self.scripts.read_policy, *self.security.node_log_groups.values()]
