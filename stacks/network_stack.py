"""NetworkStack: the VPC, its endpoints and the node, EFA and training security groups."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from constructs import Construct

from config import EgressMode, Environment
from config.fleets import FleetRole
from gpu_constructs.network.efa_security_group import EfaSecurityGroup
from gpu_constructs.network.node_security_group import NodeSecurityGroup
from gpu_constructs.network.platform_vpc import PlatformVpc
from gpu_constructs.network.training_security_group import TrainingSecurityGroup
from gpu_constructs.network.vpc_endpoints import InterfaceEndpoints, S3GatewayEndpoint
from gpu_constructs.platform_fleet.site import NodeNetwork
from stacks.base import PlatformStack


class NetworkStack(PlatformStack):
    """Attributes: ``vpc``, ``gpu_subnets``, ``efa_security_group``, ``node_security_group``,
    ``training_security_group`` (None without a training fleet), ``endpoint_security_group`` (isolated mode)."""

    def __init__(self, scope: Construct, construct_id: str, *, env: Environment, logs_key: kms.IKey) -> None:
        super().__init__(scope, construct_id, env=env, stateful=True, description=f"GPU platform {env.name}: network")
        net = env.network
        platform_vpc = PlatformVpc(
            self,
            "Network",
            cidr=net.vpc_cidr,
            availability_zones=env.availability_zones,
            nat_gateways=net.nat_gateways if net.egress is EgressMode.NAT else 0,
            gpu_subnet_mask=net.gpu_subnet_mask,
            public_subnet_mask=net.public_subnet_mask,
            flow_log_key=logs_key,
            log_retention=self.log_retention,
            removal_policy=self.removal_policy,
        )
        self.vpc = platform_vpc.vpc
        self.gpu_subnets = platform_vpc.gpu_subnets
        s3 = S3GatewayEndpoint(
            self,
            "S3Endpoint",
            vpc=self.vpc,
            subnets=self.gpu_subnets,
            logs_key=logs_key,
            log_retention=self.log_retention,
            log_removal_policy=self.removal_policy,
        )
        self.endpoint_security_group = None
        if net.egress is EgressMode.ISOLATED:
            endpoints = InterfaceEndpoints(
                self,
                "ApiEndpoints",
                vpc=self.vpc,
                vpc_cidr=net.vpc_cidr,
                subnets=self.gpu_subnets,
                pcs=env.slurm is not None,
            )
            self.endpoint_security_group = endpoints.security_group
        self.efa_security_group = EfaSecurityGroup(self, "Efa", vpc=self.vpc).security_group
        self.node_security_group = NodeSecurityGroup(
            self,
            "Nodes",
            vpc=self.vpc,
            vpc_cidr=net.vpc_cidr,
            s3_prefix_list_id=s3.prefix_list_id,
            endpoint_security_group=self.endpoint_security_group,
            internet_egress=net.egress is EgressMode.NAT,
        ).security_group
        # A job's TCP between training nodes (every training fleet, EFA or not), off the shared node group.
        self.training_security_group: ec2.ISecurityGroup | None = None
        if any(fleet.role is FleetRole.TRAINING for fleet in env.fleets):
            self.training_security_group = TrainingSecurityGroup(self, "Training", vpc=self.vpc).security_group

    @property
    def node_network(self) -> NodeNetwork:
        """The VPC and the groups every GPU node carries, as the fleet stack takes them."""
        return NodeNetwork(self.vpc, self.node_security_group, self.efa_security_group, self.training_security_group)
