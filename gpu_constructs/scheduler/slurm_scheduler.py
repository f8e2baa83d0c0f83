"""Slurm on AWS PCS for an environment: the cluster, its security groups and the login nodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IConstruct

from config.slurm import Slurm
from gpu_constructs.fleet.render.node_settings import people_json
from gpu_constructs.scheduler.login_nodes import LoginNodes
from gpu_constructs.scheduler.slurm_cluster import SlurmCluster
from gpu_constructs.scheduler.slurm_fleet import NodeSecurityGroups
from gpu_constructs.scheduler.slurm_security_groups import SlurmSecurityGroups


@dataclass(frozen=True)
class SlurmProfiles:
    """The instance profiles PCS launches with (path ``/aws-pcs/``, gpu_constructs/scheduler/pcs_iam.py): the
    compute nodes' (the GPU node role's policies) and the login nodes' (Session Manager only)."""

    compute: iam.IInstanceProfile
    login: iam.IInstanceProfile


@dataclass(frozen=True)
class SlurmFleetCluster:
    """What a Slurm fleet's node groups are built on: the cluster's id, the compute nodes' instance profile and the
    security groups they carry."""

    cluster_id: str
    instance_profile: iam.IInstanceProfile
    security_groups: NodeSecurityGroups


@dataclass(frozen=True)
class PlatformGroups:
    """The platform's security groups every GPU node carries (network stack)."""

    node: ec2.ISecurityGroup
    efa: ec2.ISecurityGroup
    training: ec2.ISecurityGroup


class SlurmScheduler(Construct):
    """The cluster's controller interface sits in ``controller_subnet_id`` (the GPU subnet of the environment's first
    zone: Networking is create-only, so no fleet edit may move it), the login nodes beside it; they wait for ``launch_after`` (what a node needs at boot: the read
    policy of its scripts, the node log groups). The stack outputs the cluster's id. The Slurm fleets' node groups
    and queues are built by each fleet (gpu_constructs/platform_fleet/) on ``fleet_cluster``.

    Attributes:
        security_groups, cluster (SlurmCluster), login (LoginNodes), fleet_cluster (SlurmFleetCluster).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env_name: str,
        slurm: Slurm,
        controller_subnet_id: str,
        vpc: ec2.IVpc,
        machine_image: ec2.IMachineImage,
        groups: PlatformGroups,
        profiles: SlurmProfiles,
        volume_key: kms.IKey,
        launch_after: Sequence[IConstruct] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_groups = SlurmSecurityGroups(self, "SecurityGroups", vpc=vpc)
        self.cluster = SlurmCluster(
            self, "Cluster", slurm=slurm, subnet_id=controller_subnet_id, security_group=self.security_groups.cluster
        )
        self.login = LoginNodes(
            self,
            "Login",
            login=slurm.login,
            cluster_id=self.cluster.cluster_id,
            subnet_ids=[controller_subnet_id],
            machine_image=machine_image,
            instance_profile=profiles.login,
            security_groups=[groups.node, self.security_groups.nodes],
            volume_key=volume_key,
            people_json=people_json(slurm),
            accounting=slurm.accounting,
        )
        self.login.node_group.node.add_dependency(*launch_after)
        self.fleet_cluster = SlurmFleetCluster(
            cluster_id=self.cluster.cluster_id,
            instance_profile=profiles.compute,
            security_groups=NodeSecurityGroups(groups.node, groups.efa, groups.training, self.security_groups.nodes),
        )
        CfnOutput(
            Stack.of(self),
            "SlurmClusterId",
            value=self.cluster.cluster_id,
            description=f"GPU platform {env_name}: the AWS PCS cluster (managed Slurm) of the Slurm fleets",
        )
