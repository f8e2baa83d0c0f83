"""The Application Load Balancer in front of a served inference fleet (``fleets[].service``)."""

from __future__ import annotations

import re

from aws_cdk import Duration, Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.region_info import RegionInfo
from constructs import Construct

from config.fleets.service import Service
from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.network.platform_vpc import GPU_SUBNET_GROUP, PUBLIC_SUBNET_GROUP

#: Target health checks: a node is healthy after 3 answers in a row, unhealthy after 3 misses (15 s apart).
HEALTH_CHECK_INTERVAL = Duration.seconds(15)
HEALTH_CHECK_TIMEOUT = Duration.seconds(5)
HEALTHY_THRESHOLD = 3
UNHEALTHY_THRESHOLD = 3
#: The group's grace before it acts on a served node's ELB health: the launch hook holds a node until its
#: service answers and the group registers it with the target group only then, so the grace needs to cover
#: only the target's first healthy checks (3 x 15 s), not the bootstrap.
TARGET_GRACE_PERIOD = Duration.minutes(2)
#: A node without a load balancer: EC2 status checks only, after a grace of 15 minutes in service.
EC2_GRACE_PERIOD = Duration.minutes(15)
#: ELB's service principal for access log delivery in Regions that have no ELB account (opened since 2022).
LOG_DELIVERY_PRINCIPAL = "logdelivery.elasticloadbalancing.amazonaws.com"


def listener_port(service: Service) -> int:
    """443 (HTTPS) with a certificate, else 80 (HTTP)."""
    return 443 if service.load_balancer.certificate_arn else 80


def access_log_writer(region: str) -> iam.IPrincipal:
    """Who delivers ALB access logs in ``region``: the Region's Elastic Load Balancing account where it has
    one (Regions opened before August 2022), else the log delivery service principal."""
    account = RegionInfo.get(region).elbv2_account
    return iam.AccountPrincipal(account) if account else iam.ServicePrincipal(LOG_DELIVERY_PRINCIPAL)


def group_health_checks(*, served: bool) -> autoscaling.HealthChecks:
    """A served fleet's group also replaces a node its target group finds unhealthy (ELB health checks)."""
    if not served:
        return autoscaling.HealthChecks.ec2(grace_period=EC2_GRACE_PERIOD)
    return autoscaling.HealthChecks.with_additional_checks(
        additional_types=[autoscaling.AdditionalHealthCheckType.ELB], grace_period=TARGET_GRACE_PERIOD
    )


class ServiceLoadBalancer(Construct):
    """Load balancer, its security group, listener and target group, attached to ``auto_scaling_group``.

    The load balancer's group admits only the configured clients on the listener port and sends only to the
    node group on the service port; the node group admits the service port from the load balancer's group
    only. Access logs go to ``access_log_bucket`` (SSE-S3: ALB access logs support no other encryption)
    under ``access_log_prefix``. With ``requests_per_target`` the group also tracks requests per target.

    Attributes:
        load_balancer, security_group, target_group, listener, url.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fleet_name: str,
        service: Service,
        vpc: ec2.IVpc,
        auto_scaling_group: autoscaling.AutoScalingGroup,
        node_security_group: ec2.ISecurityGroup,
        access_log_bucket: s3.IBucket,
        access_log_prefix: str,
    ) -> None:
        super().__init__(scope, construct_id)
        lb_config = service.load_balancer
        https = lb_config.certificate_arn is not None
        self.security_group = self._security_group(fleet_name, service, vpc, node_security_group)
        self.load_balancer = self._load_balancer(vpc, internal=lb_config.internal)
        self._log_access(access_log_bucket, access_log_prefix)
        self.target_group = self._target_group(vpc, service)
        self.listener = self._listener(service)
        self._register_nodes(auto_scaling_group)
        if lb_config.requests_per_target is not None:
            self._track_requests(auto_scaling_group, lb_config.requests_per_target)
        scheme = "https" if https else "http"
        self.url = f"{scheme}://{self.load_balancer.load_balancer_dns_name}"
        self._acknowledge(fleet_name, https=https)

    def _security_group(
        self, fleet_name: str, service: Service, vpc: ec2.IVpc, node_security_group: ec2.ISecurityGroup
    ) -> ec2.SecurityGroup:
        """The load balancer's group: the configured clients in on the listener port, the service port out to the
        nodes; and the node group's rule that admits the service port from it."""
        lb_config = service.load_balancer
        security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"Load balancer of the {fleet_name} fleet: its clients in, the service port to nodes out",
            allow_all_outbound=False,
        )
        listen = ec2.Port.tcp(listener_port(service))
        for cidr in lb_config.allowed_cidrs:
            security_group.add_ingress_rule(ec2.Peer.ipv4(cidr), listen, f"Clients of {fleet_name} ({cidr})")
        for group in lb_config.allowed_security_groups:
            security_group.add_ingress_rule(
                ec2.Peer.security_group_id(group), listen, f"Clients of {fleet_name} ({group})"
            )
        serve = ec2.Port.tcp(service.port)
        security_group.add_egress_rule(node_security_group, serve, f"The {fleet_name} service on the nodes")
        # The rule lives here (remote_rule), beside the load balancer's group, not in the node group's stack.
        node_security_group.add_ingress_rule(
            security_group, serve, f"The {fleet_name} service from its load balancer", remote_rule=True
        )
        return security_group

    def _load_balancer(self, vpc: ec2.IVpc, *, internal: bool) -> elbv2.ApplicationLoadBalancer:
        return elbv2.ApplicationLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            # Internal: the private GPU subnets; internet-facing: the public ones (config: egress nat only).
            vpc_subnets=ec2.SubnetSelection(subnet_group_name=GPU_SUBNET_GROUP if internal else PUBLIC_SUBNET_GROUP),
            internet_facing=not internal,
            security_group=self.security_group,
            drop_invalid_header_fields=True,
        )

    def _target_group(self, vpc: ec2.IVpc, service: Service) -> elbv2.ApplicationTargetGroup:
        """The nodes on the service port, healthy once ``service.health_check_path`` answers 200."""
        return elbv2.ApplicationTargetGroup(
            self,
            "Targets",
            vpc=vpc,
            port=service.port,
            protocol=elbv2.ApplicationProtocol.HTTP,
            target_type=elbv2.TargetType.INSTANCE,
            deregistration_delay=Duration.seconds(service.load_balancer.deregistration_delay_seconds),
            health_check=elbv2.HealthCheck(
                path=service.health_check_path,
                port="traffic-port",
                protocol=elbv2.Protocol.HTTP,
                healthy_http_codes="200",
                interval=HEALTH_CHECK_INTERVAL,
                timeout=HEALTH_CHECK_TIMEOUT,
                healthy_threshold_count=HEALTHY_THRESHOLD,
                unhealthy_threshold_count=UNHEALTHY_THRESHOLD,
            ),
        )

    def _listener(self, service: Service) -> elbv2.ApplicationListener:
        """HTTPS on the configured certificate with a modern TLS policy, else HTTP; to the target group."""
        certificate = service.load_balancer.certificate_arn
        https = certificate is not None
        return self.load_balancer.add_listener(
            "Listener",
            port=listener_port(service),
            protocol=elbv2.ApplicationProtocol.HTTPS if https else elbv2.ApplicationProtocol.HTTP,
            certificates=[elbv2.ListenerCertificate.from_arn(certificate)] if certificate is not None else None,
            ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS if https else None,
            default_target_groups=[self.target_group],
            open=False,  # the security group holds the clients
        )

    def _register_nodes(self, auto_scaling_group: autoscaling.AutoScalingGroup) -> None:
        """The group registers its nodes once they complete the launch hook. Set on the group itself, not by
        attach_to_application_target_group: that also opens the node group to the load balancer with a rule
        in the node group's (network) stack, which would then depend on this one."""
        cfn_group = cfn_child(auto_scaling_group, autoscaling.CfnAutoScalingGroup)
        cfn_group.target_group_arns = [self.target_group.target_group_arn]
        auto_scaling_group.node.add_dependency(self.listener)  # a target group takes nodes once it has a listener

    def _track_requests(self, auto_scaling_group: autoscaling.AutoScalingGroup, requests_per_target: int) -> None:
        """Scale ``auto_scaling_group`` to ``requests_per_target`` requests per node per minute."""
        autoscaling.TargetTrackingScalingPolicy(
            self,
            "RequestsPerTarget",
            auto_scaling_group=auto_scaling_group,
            predefined_metric=autoscaling.PredefinedMetric.ALB_REQUEST_COUNT_PER_TARGET,
            # app/<lb name>/<id>/targetgroup/<tg name>/<id> (Auto Scaling API, PredefinedMetricSpecification)
            resource_label=f"{self.load_balancer.load_balancer_full_name}/{self.target_group.target_group_full_name}",
            target_value=requests_per_target,
        )

    def _log_access(self, bucket: s3.IBucket, prefix: str) -> None:
        """Access logs to ``bucket``/``prefix``/AWSLogs/<account>/..., written by ELB's principal of the Region."""
        stack = Stack.of(self)
        self.load_balancer.set_attribute("access_logs.s3.enabled", "true")
        self.load_balancer.set_attribute("access_logs.s3.bucket", bucket.bucket_name)
        self.load_balancer.set_attribute("access_logs.s3.prefix", prefix)
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlbAccessLogs" + re.sub("[^A-Za-z0-9]", "", prefix.title()),
                principals=[access_log_writer(stack.region)],
                actions=["s3:PutObject"],
                resources=[bucket.arn_for_objects(f"{prefix}/AWSLogs/{stack.account}/*")],
            )
        )
        # The load balancer checks it may write when access logging is turned on: the policy comes first.
        if bucket.policy is not None:
            self.load_balancer.node.add_dependency(bucket.policy)

    def _acknowledge(self, fleet_name: str, *, https: bool) -> None:
        lb = self.load_balancer
        acknowledge(
            lb,
            "NIST.800.53.R5-ELBDeletionProtectionEnabled",
            f"The {fleet_name} load balancer holds no data and is rebuilt with the fleet stack; deletion protection "
            "would block that stack's replacement and the environment's teardown. Clients find it by the stack "
            "output, not a fixed address.",
        )
        acknowledge(
            lb,
            "NIST.800.53.R5-ALBWAFEnabled",
            f"The {fleet_name} load balancer admits only the clients listed in fleets[].service.load_balancer "
            "(security group ingress by CIDR or group); a web ACL is left to the environment's owner.",
        )
        if not https:
            reason = (
                f"No certificate_arn is configured for {fleet_name}: the listener serves HTTP to the listed clients "
                "only (security group); setting certificate_arn replaces it with an HTTPS listener on an ACM "
                "certificate with a modern TLS policy, and no HTTP listener is left to redirect."
            )
            acknowledge(lb, "NIST.800.53.R5-ALBHttpToHttpsRedirection", reason)
            acknowledge(self.listener, "NIST.800.53.R5-ELBv2ACMCertificateRequired", reason)
