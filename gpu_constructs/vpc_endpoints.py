"""VPC endpoints that let isolated GPU subnets reach AWS APIs without internet egress."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

#: Interface endpoints a GPU node needs with no internet route: Session Manager
#: (ssm, ssmmessages, ec2messages), container images (ecr.api, ecr.dkr), the
#: CloudWatch agent (logs, monitoring), credentials (sts), lifecycle hooks and
#: health (autoscaling), and EC2 describe calls (ec2).
INTERFACE_SERVICES: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "Ec2Messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "AutoScaling": ec2.InterfaceVpcEndpointAwsService.AUTOSCALING,
    "Ec2": ec2.InterfaceVpcEndpointAwsService.EC2,
}


class S3GatewayEndpoint(Construct):
    """S3 gateway endpoint on the given subnets' route tables (no cost, no internet path)."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, subnets: ec2.SubnetSelection) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = vpc.add_gateway_endpoint(
            "Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=[subnets]
        )


class InterfaceEndpoints(Construct):
    """One private-DNS interface endpoint per service in ``INTERFACE_SERVICES``.

    The endpoints share one security group that admits HTTPS from the VPC CIDR only
    and sends nothing out.

    Attributes:
        security_group: the endpoints' security group.
        endpoints: service key -> endpoint.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, vpc_cidr: str, subnets: ec2.SubnetSelection
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="VPC interface endpoints: HTTPS from inside the VPC only",
            allow_all_outbound=False,
        )
        self.security_group.add_ingress_rule(
            # The literal CIDR (not a GetAtt) so that rule packs can read the source.
            ec2.Peer.ipv4(vpc_cidr),
            ec2.Port.tcp(443),
            "HTTPS from the VPC to AWS APIs",
        )
        self.endpoints = {
            key: vpc.add_interface_endpoint(
                key,
                service=service,
                subnets=subnets,
                security_groups=[self.security_group],
                private_dns_enabled=True,
                open=False,
            )
            for key, service in INTERFACE_SERVICES.items()
        }
