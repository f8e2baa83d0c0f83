"""The security group every GPU node carries, EFA or not."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

#: Lustre client traffic to the file servers: the LNet port and the ports clients connect from
#: (FSx for Lustre user guide, file system access control with Amazon VPC).
LUSTRE_PORTS = ((988, 988), (1018, 1023))


class NodeSecurityGroup(Construct):
    """Admits nothing by default; sends only what a node needs.

    Other stacks add the few ingress rules a node needs (Lustre callbacks from the file
    system's group). Outbound, each rule for one kind of node call:

    - HTTPS to the interface endpoints' group (isolated environments: every AWS API a node calls);
    - HTTPS to the region's S3 prefix list (the gateway endpoint: node scripts, ECR layers);
    - Lustre (TCP 988, 1018-1023) inside the VPC: the file system's group lives in the storage
      stack, which depends on this one, so the rule names the VPC's range;
    - with NAT egress only: HTTPS to anywhere (AWS APIs without endpoints, container registries).
      Nodes install nothing at boot; the image builds, which do (apt over HTTP), have a group of their own.

    Nothing between nodes: every fleet of the environment carries this group, so a rule between its
    members would open one fleet's ports to every other (a served port to training nodes, a job's
    rendezvous to inference nodes). A training job's TCP has the training group, EFA traffic the EFA
    group, each on the fleets that need it. DNS (the VPC resolver), instance metadata and the time
    service are link-local and not filtered by security groups.

    Attributes:
        security_group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        vpc_cidr: str,
        s3_prefix_list_id: str,
        endpoint_security_group: ec2.ISecurityGroup | None,
        internet_egress: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="GPU nodes: no ingress but from platform groups; outbound HTTPS to AWS, Lustre in the VPC",
            allow_all_outbound=False,
        )
        group = self.security_group
        https = ec2.Port.tcp(443)
        if endpoint_security_group is not None:
            group.add_egress_rule(endpoint_security_group, https, "HTTPS to the VPC interface endpoints")
        group.add_egress_rule(ec2.Peer.prefix_list(s3_prefix_list_id), https, "HTTPS to S3 (gateway endpoint)")
        for low, high in LUSTRE_PORTS:
            port = ec2.Port.tcp(low) if low == high else ec2.Port.tcp_range(low, high)
            group.add_egress_rule(ec2.Peer.ipv4(vpc_cidr), port, "Lustre to the file system in the VPC")
        if internet_egress:
            group.add_egress_rule(ec2.Peer.any_ipv4(), https, "HTTPS through NAT")
