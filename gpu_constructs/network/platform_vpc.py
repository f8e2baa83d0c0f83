"""The platform VPC: private GPU subnets, optional NAT egress, flow logs to an encrypted log group."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge

GPU_SUBNET_GROUP = "gpu"
PUBLIC_SUBNET_GROUP = "public"


class PlatformVpc(Construct):
    """A VPC whose GPU subnets are private; public subnets exist only for NAT egress.

    With ``nat_gateways=0`` the VPC has no internet gateway, no NAT and no public
    subnet: the GPU subnets are isolated and reach AWS through VPC endpoints.

    Attributes:
        vpc: the VPC.
        gpu_subnets: selection of the private GPU subnets (one per zone).
        flow_log_group: the encrypted log group receiving all traffic flow logs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cidr: str,
        availability_zones: Sequence[str],
        nat_gateways: int,
        gpu_subnet_mask: int,
        public_subnet_mask: int,
        flow_log_key: kms.IKey,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        with_nat = nat_gateways > 0
        self.flow_log_group = logs.LogGroup(
            self,
            "FlowLogs",
            encryption_key=flow_log_key,
            retention=log_retention,
            removal_policy=removal_policy,
        )
        flow_log_role = self._flow_log_role()
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=list(availability_zones),
            subnet_configuration=_subnet_configuration(with_nat, gpu_subnet_mask, public_subnet_mask),
            nat_gateways=nat_gateways,
            create_internet_gateway=with_nat,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            restrict_default_security_group=True,
            flow_logs={
                "AllTraffic": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group, flow_log_role),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
        )
        self.gpu_subnets = ec2.SubnetSelection(subnet_group_name=GPU_SUBNET_GROUP)
        self._acknowledge_nat_routes()

    def _acknowledge_nat_routes(self) -> None:
        """The public subnets' default route to the internet gateway, which NAT egress needs."""
        for subnet in self.vpc.public_subnets:
            acknowledge(
                subnet.node.find_child("DefaultRoute"),
                "NIST.800.53.R5-VPCNoUnrestrictedRouteToIGW",
                "The public subnets hold only the NAT gateways: GPU nodes run in the private subnets, "
                "which route 0.0.0.0/0 to NAT, never to the internet gateway; NAT egress needs this route.",
            )

    def _flow_log_role(self) -> iam.IRole:
        """The role VPC Flow Logs assumes, with a managed policy scoped to the flow log group."""
        role = iam.Role(
            self,
            "FlowLogRole",
            assumed_by=iam.ServicePrincipal("vpc-flow-logs.amazonaws.com"),
            description="VPC Flow Logs delivery to the platform's flow log group",
        )
        iam.ManagedPolicy(
            self,
            "FlowLogDelivery",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    # The group's Arn attribute ends in ":*" and so covers its log streams.
                    resources=[self.flow_log_group.log_group_arn],
                )
            ],
        )
        # The policy above is the whole grant: keep CDK from adding an inline one.
        return role.without_policy_updates()


def _subnet_configuration(
    with_nat: bool, gpu_subnet_mask: int, public_subnet_mask: int
) -> list[ec2.SubnetConfiguration]:
    """The GPU subnets (private, with egress through NAT or isolated), and public ones only for the NAT."""
    subnets = [
        ec2.SubnetConfiguration(
            name=GPU_SUBNET_GROUP,
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS if with_nat else ec2.SubnetType.PRIVATE_ISOLATED,
            cidr_mask=gpu_subnet_mask,
        )
    ]
    if with_nat:
        subnets.append(
            ec2.SubnetConfiguration(
                name=PUBLIC_SUBNET_GROUP,
                subnet_type=ec2.SubnetType.PUBLIC,
                cidr_mask=public_subnet_mask,
                map_public_ip_on_launch=False,
            )
        )
    return subnets
