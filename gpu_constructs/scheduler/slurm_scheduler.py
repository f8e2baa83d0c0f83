"""Slurm on AWS PCS for an environment: the cluster, its security groups, the login nodes and the Slurm fleets."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IConstruct

from config.catalog import InstanceType
from config.fleets import Fleet
from config.slurm import Slurm
from gpu_constructs.fleet.render.node_settings import people_json
from gpu_constructs.scheduler.login_nodes import LoginNodes
from gpu_constructs.scheduler.slurm_cluster import SlurmCluster
from gpu_constructs.scheduler.slurm_fleet import NodeSecurityGroups, SlurmFleet
from gpu_constructs.scheduler.slurm_security_groups import SlurmSecurityGroups


@dataclass(frozen=True)
class SlurmProfiles:
    """The instance profiles PCS launches with (path ``/aws-pcs/``, gpu_constructs/scheduler/pcs_iam.py): the
    compute nodes' (the GPU node role's policies) and the login nodes' (Session Manager only)."""

    compute: iam.IInstanceProfile
    login: iam.IInstanceProfile


@dataclass(frozen=True)
class SlurmFleetSpec:
    """A ``scheduler: slurm`` fleet with its catalog rows and its nodes' shell user data."""

    fleet: Fleet
    instance_types: Sequence[InstanceType]
    user_data: ec2.UserData


@dataclass(frozen=True)
class PlatformGroups:
    """The platform's security groups every GPU node carries (network stack)."""

    node: ec2.ISecurityGroup
    efa: ec2.ISecurityGroup
    training: ec2.ISecurityGroup


class SlurmScheduler(Construct):
    """The cluster's controller interface sits in the GPU subnet of the first Slurm fleet's first zone; the login
    nodes beside it; each fleet's node groups in its own zones' GPU subnets. Every node group waits for
    ``launch_after`` (what a node needs at boot: the read policy of its scripts, the node log groups). The stack
    outputs the cluster's id and each fleet's queue, for the operator command and the people who submit.

    Attributes:
        security_groups, cluster (SlurmCluster), login (LoginNodes), fleets (fleet name -> SlurmFleet).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env_name: str,
        slurm: Slurm,
        fleets: Sequence[SlurmFleetSpec],
        vpc: ec2.IVpc,
        subnet_group_name: str,
        machine_image: ec2.IMachineImage,
        groups: PlatformGroups,
        profiles: SlurmProfiles,
        volume_key: kms.IKey,
        placement_tags: Mapping[str, str] | None = None,
        launch_after: Sequence[IConstruct] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        if not fleets:
            raise ValueError("a Slurm scheduler needs at least one scheduler: slurm fleet (config/slurm.py)")
        self.security_groups = SlurmSecurityGroups(self, "SecurityGroups", vpc=vpc)

        def subnets(zones: Sequence[str]) -> list[str]:
            return vpc.select_subnets(subnet_group_name=subnet_group_name, availability_zones=list(zones)).subnet_ids

        controller_subnet = subnets(fleets[0].fleet.availability_zones[:1])[0]
        self.cluster = SlurmCluster(
            self, "Cluster", slurm=slurm, subnet_id=controller_subnet, security_group=self.security_groups.cluster
        )
        self.login = LoginNodes(
            self,
            "Login",
            login=slurm.login,
            cluster_id=self.cluster.cluster_id,
            subnet_ids=[controller_subnet],
            machine_image=machine_image,
            instance_profile=profiles.login,
            security_groups=[groups.node, self.security_groups.nodes],
            volume_key=volume_key,
            people_json=people_json(slurm),
            accounting=slurm.accounting,
        )
        node_groups = NodeSecurityGroups(groups.node, groups.efa, groups.training, self.security_groups.nodes)
        self.fleets = {
            spec.fleet.name: SlurmFleet(
                self,
                f"Fleet-{spec.fleet.name}",
                fleet=spec.fleet,
                instance_types=spec.instance_types,
                cluster_id=self.cluster.cluster_id,
                subnet_ids=subnets(spec.fleet.availability_zones),
                machine_image=machine_image,
                user_data=spec.user_data,
                instance_profile=profiles.compute,
                security_groups=node_groups,
                volume_key=volume_key,
                placement_tags=placement_tags,
            )
            for spec in fleets
        }
        self._wire(env_name, launch_after)

    def _wire(self, env_name: str, launch_after: Sequence[IConstruct]) -> None:
        """Every node group after ``launch_after``; the stack's outputs."""
        for group in [self.login.node_group, *(g for f in self.fleets.values() for g in f.node_groups.values())]:
            group.node.add_dependency(*launch_after)
        stack = Stack.of(self)
        CfnOutput(
            stack,
            "SlurmClusterId",
            value=self.cluster.cluster_id,
            description=f"GPU platform {env_name}: the AWS PCS cluster (managed Slurm) of the Slurm fleets",
        )
        for name, fleet in self.fleets.items():
            CfnOutput(
                stack,
                f"SlurmQueue{re.sub('[^A-Za-z0-9]', '', name.title())}",
                value=fleet.queue.attr_id,
                description=f"GPU platform {env_name}: the PCS queue of the {name} fleet (Slurm partition {name})",
            )
