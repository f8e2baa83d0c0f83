"""FSx for Lustre in one zone, linked to the data bucket, reachable only by the nodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gpu_constructs.network.security_groups import keep_default_egress_closed

#: Lustre clients reach the file servers on TCP 988 and 1018-1023 (FSx for Lustre user guide).
LUSTRE_PORTS = {"988": (988, 988), "1018to1023": (1018, 1023)}

_VERSIONS = {"2.15": fsx.FileSystemTypeVersion.V_2_15, "2.12": fsx.FileSystemTypeVersion.V_2_12}


@dataclass(frozen=True)
class Link:
    """One data repository association: a directory and the bucket prefix behind it."""

    file_system_path: str
    bucket_prefix: str
    import_events: Sequence[str]
    export_events: Sequence[str]


@dataclass(frozen=True)
class LustreSettings:
    deployment_type: str  # SCRATCH_1 | SCRATCH_2 | PERSISTENT_1 | PERSISTENT_2
    storage_capacity_gib: int
    per_unit_storage_throughput: int | None
    data_compression: str  # LZ4 | NONE
    lustre_version: str
    automatic_backup_retention_days: int


class LustreStorage(Construct):
    """The file system, its security group and its data repository associations.

    The group admits TCP 988 and 1018-1023 from the client group and from
    itself, nothing else; the client group admits the same ports from the file
    system (Lustre servers also open connections to clients). Persistent types
    are encrypted with ``key``; scratch types only support the FSx service key.

    Attributes:
        file_system, security_group, associations.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        client_security_group: ec2.ISecurityGroup,
        settings: LustreSettings,
        key: kms.IKey,
        bucket: s3.IBucket,
        links: Sequence[Link],
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = self._security_group(vpc, client_security_group)
        self.file_system = self._file_system(vpc, subnet, settings, key, removal_policy)
        self._drop_wide_lustre_rule()
        self.associations = [self._association(link, bucket) for link in links]

    def _security_group(self, vpc: ec2.IVpc, clients: ec2.ISecurityGroup) -> ec2.SecurityGroup:
        """The file system's group, with the Lustre ports to and from ``clients`` and itself only; and the rules
        of ``clients`` that admit the file system."""
        security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="FSx for Lustre: Lustre ports from GPU nodes and between file servers only",
            allow_all_outbound=False,
        )
        for name, (low, high) in LUSTRE_PORTS.items():
            port = ec2.Port.tcp_range(low, high) if low != high else ec2.Port.tcp(low)
            security_group.add_ingress_rule(clients, port, "Lustre from GPU nodes")
            security_group.add_ingress_rule(security_group, port, "Lustre between file servers")
            security_group.add_egress_rule(clients, port, "Lustre to GPU nodes")
            security_group.add_egress_rule(security_group, port, "Lustre between file servers")
            # The client group belongs to the long-lived network stack: its rule is
            # declared here so that the network stack never depends on this one.
            ec2.CfnSecurityGroupIngress(
                self,
                f"ClientsFromFileSystem{name}",
                group_id=clients.security_group_id,
                source_security_group_id=security_group.security_group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description="Lustre from the file system",
            )
        keep_default_egress_closed(security_group)
        return security_group

    def _file_system(
        self,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        settings: LustreSettings,
        key: kms.IKey,
        removal_policy: RemovalPolicy,
    ) -> fsx.LustreFileSystem:
        """The file system in ``subnet``; a persistent one encrypted with ``key`` and backed up as configured."""
        persistent = settings.deployment_type.startswith("PERSISTENT")
        backups = settings.automatic_backup_retention_days
        return fsx.LustreFileSystem(
            self,
            "FileSystem",
            vpc=vpc,
            vpc_subnet=subnet,
            security_group=self.security_group,
            storage_capacity_gib=settings.storage_capacity_gib,
            file_system_type_version=_VERSIONS[settings.lustre_version],
            kms_key=key if persistent else None,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=fsx.LustreDeploymentType[settings.deployment_type],
                per_unit_storage_throughput=settings.per_unit_storage_throughput,
                data_compression_type=fsx.LustreDataCompressionType[settings.data_compression],
                automatic_backup_retention=Duration.days(backups) if persistent else None,
                copy_tags_to_backups=True if backups else None,
            ),
            removal_policy=removal_policy,
        )

    def _drop_wide_lustre_rule(self) -> None:
        """The L2 file system opens TCP 988-1023 within its group; Lustre needs only 988
        and 1018-1023 (the group's own rules), so drop the wider one."""
        for child in list(self.security_group.node.children):
            if child.node.id.endswith(":988-1023"):
                self.security_group.node.try_remove_child(child.node.id)

    def _association(self, link: Link, bucket: s3.IBucket) -> fsx.CfnDataRepositoryAssociation:
        """``link``'s directory, imported from and exported to its prefix of ``bucket``."""
        return fsx.CfnDataRepositoryAssociation(
            self,
            f"Link{link.bucket_prefix.strip('/').replace('/', '-').title().replace('-', '')}",
            file_system_id=self.file_system.file_system_id,
            file_system_path=link.file_system_path,
            data_repository_path=f"s3://{bucket.bucket_name}/{link.bucket_prefix}",
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                    events=list(link.import_events)
                ),
                auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(
                    events=list(link.export_events)
                ),
            ),
        )
