"""VPC endpoints that let isolated GPU subnets reach AWS APIs without internet egress."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from gpu_constructs.compliance.sdk_call_resource import sdk_call_resource

#: Where DescribePrefixLists answers the prefix list's id.
PREFIX_LIST_ID_PATH = "PrefixLists.0.PrefixListId"

#: Who on a GPU node calls AWS besides the node scripts (scripts/node, whose boto3 clients and
#: AWS CLI calls the tests read from the code), and the API endpoints each calls, by the service
#: name of the endpoint (``com.amazonaws.<region>.<name>``).
AGENT_CALLS: dict[str, tuple[str, ...]] = {
    "SSM agent: registration, Session Manager, Run Command": ("ssm", "ssmmessages", "ec2messages"),
    # The session document sets kmsKeyId: the agent itself asks KMS for the session's data key.
    "SSM agent: KMS-encrypted Session Manager sessions": ("kms",),
    # ec2:DescribeTags resolves the AutoScalingGroupName dimension every fleet alarm needs.
    "CloudWatch agent: logs, metrics, the AutoScalingGroupName dimension": ("logs", "monitoring", "ec2"),
    # The node role may pull from this account's repositories (gpu_constructs/security/node_role.py).
    "containers (CONTAINERS_ENABLED): image pulls from ECR, layers from S3": ("ecr.api", "ecr.dkr", "s3"),
    # GetCallerIdentity needs no IAM permission; the boundary allows no sts:AssumeRole, so a job
    # that needs other roles gets them another way (e.g. its own credentials), not through the node.
    "training jobs' AWS SDKs: sts:GetCallerIdentity (the account id), on the regional endpoint": ("sts",),
}

#: Boto3 client and AWS CLI service names -> the service name of their endpoint.
CLIENT_ENDPOINTS: dict[str, str] = {
    "autoscaling": "autoscaling",
    "cloudwatch": "monitoring",
    "ec2": "ec2",
    "ecr": "ecr.api",
    "kms": "kms",
    "logs": "logs",
    "s3": "s3",
    "ssm": "ssm",
    "sts": "sts",
}

#: Reached through the gateway endpoint on the GPU subnets' route tables, not an interface endpoint.
GATEWAY_SERVICES = ("s3",)

#: One private-DNS interface endpoint per service a node calls (AGENT_CALLS and the node scripts:
#: autoscaling for lifecycle hooks and health, monitoring for the GPU health metric), with no
#: internet route. KMS also serves SecureString parameters and SSE-KMS objects only through the
#: services that use it (SSM, S3), but encrypted sessions need it directly.
INTERFACE_SERVICES: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "Ec2Messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "AutoScaling": ec2.InterfaceVpcEndpointAwsService.AUTOSCALING,
    "Ec2": ec2.InterfaceVpcEndpointAwsService.EC2,
}

#: AWS PCS's API, which the PCS agent on a Slurm node calls to register (pcs:RegisterComputeNodeGroupInstance).
PCS_SERVICE: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    "Pcs": ec2.InterfaceVpcEndpointAwsService.PARALLEL_COMPUTING_SERVICE
}


class S3GatewayEndpoint(Construct):
    """S3 gateway endpoint on the given subnets' route tables (no cost, no internet path).

    Attributes:
        endpoint; prefix_list_id: the id of the region's S3 prefix list (``com.amazonaws.<region>.s3``),
        the destination a security group rule names for traffic to the gateway. CloudFormation does
        not return it, so an SDK call (``ec2:DescribePrefixLists``, read-only) looks it up at deploy.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        logs_key: kms.IKey,
        log_retention: logs.RetentionDays,
        log_removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = vpc.add_gateway_endpoint(
            "Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=[subnets]
        )
        region = Stack.of(self).region
        lookup = cr.AwsSdkCall(
            service="EC2",
            action="DescribePrefixLists",
            parameters={"Filters": [{"Name": "prefix-list-name", "Values": [f"com.amazonaws.{region}.s3"]}]},
            physical_resource_id=cr.PhysicalResourceId.of(f"com.amazonaws.{region}.s3"),
            output_paths=[PREFIX_LIST_ID_PATH],
        )
        self.prefix_list = sdk_call_resource(
            self,
            "PrefixList",
            purpose="the read-only DescribePrefixLists of the region's S3 prefix list",
            on_create=lookup,
            on_update=lookup,
            statements=[
                iam.PolicyStatement(sid="FindTheS3PrefixList", actions=["ec2:DescribePrefixLists"], resources=["*"])
            ],
            logs_key=logs_key,
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
            wildcard_reason="ec2:DescribePrefixLists has no resource types and only reads.",
        )
        self.prefix_list_id = self.prefix_list.get_response_field(PREFIX_LIST_ID_PATH)


class InterfaceEndpoints(Construct):
    """One private-DNS interface endpoint per service in ``INTERFACE_SERVICES``; with ``pcs`` (an environment with
    Slurm fleets) also AWS PCS's, which a PCS node calls to register with its cluster (``Pcs``).

    The endpoints share one security group that admits HTTPS from the VPC CIDR only
    and sends nothing out.

    Attributes:
        security_group: the endpoints' security group.
        endpoints: service key -> endpoint.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        vpc_cidr: str,
        subnets: ec2.SubnetSelection,
        pcs: bool = False,
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
            for key, service in {**INTERFACE_SERVICES, **(PCS_SERVICE if pcs else {})}.items()
        }
