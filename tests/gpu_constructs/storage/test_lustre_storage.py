"""LustreStorage: the file system's group opens TCP 988 and 1018-1023 to the nodes' group (and itself) only,
the nodes' group admits the same ports back from it, persistent types use the customer key, and each link
is a data repository association on the bucket."""

from __future__ import annotations

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from gpu_constructs.storage.lustre_storage import Link, LustreSettings, LustreStorage
from tests.gpu_constructs.helpers import DESTROY, bare_stack, group_id, only, resolved, sg_rules, template, vpc

LUSTRE = {("tcp", 988, 988), ("tcp", 1018, 1023)}
LINKS = [
    Link("/datasets", "datasets/", ["NEW", "CHANGED", "DELETED"], []),
    Link("/checkpoints", "checkpoints/", [], ["NEW", "CHANGED", "DELETED"]),
]


def _build(deployment_type: str) -> Template:
    stack = bare_stack()
    network = vpc(stack)
    persistent = deployment_type.startswith("PERSISTENT")
    LustreStorage(
        stack,
        "Lustre",
        vpc=network,
        subnet=network.isolated_subnets[0],
        client_security_group=ec2.SecurityGroup(stack, "Nodes", vpc=network, allow_all_outbound=False),
        settings=LustreSettings(
            deployment_type=deployment_type,
            storage_capacity_gib=1200,
            per_unit_storage_throughput=250 if persistent else None,
            data_compression="LZ4",
            lustre_version="2.15",
            automatic_backup_retention_days=7 if persistent else 0,
        ),
        key=kms.Key(stack, "DataKey"),
        bucket=s3.Bucket(stack, "Data", bucket_name="gpu-platform-dev-data"),
        links=LINKS,
        removal_policy=DESTROY,
    )
    return template(stack)


@pytest.fixture(scope="module")
def persistent() -> Template:
    return _build("PERSISTENT_2")


def test_file_system_group_talks_lustre_with_nodes_and_itself_only(persistent: Template) -> None:
    fs = group_id(persistent, "Lustre")
    nodes = group_id(persistent, "Nodes")
    peers = {(peer, *ports) for peer in (nodes, fs) for ports in LUSTRE}
    assert sg_rules(persistent, fs, "Ingress") == peers
    assert sg_rules(persistent, fs, "Egress") == peers
    # The nodes' group admits the same ports from the file system (servers call clients back).
    assert sg_rules(persistent, nodes, "Ingress") == {(fs, *ports) for ports in LUSTRE}


def test_persistent_file_system_uses_the_key_and_keeps_backups(persistent: Template) -> None:
    _, fs = only(persistent, "AWS::FSx::FileSystem")
    props = fs["Properties"]
    assert props["KmsKeyId"]["Ref"].startswith("DataKey")
    assert props["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    assert props["LustreConfiguration"]["AutomaticBackupRetentionDays"] == 7
    assert props["FileSystemTypeVersion"] == "2.15"


def test_links_map_directories_to_bucket_prefixes(persistent: Template) -> None:
    associations = persistent.find_resources("AWS::FSx::DataRepositoryAssociation")
    got = {a["Properties"]["FileSystemPath"]: a["Properties"] for a in associations.values()}
    assert resolved(persistent, got["/datasets"]["DataRepositoryPath"]) == "s3://gpu-platform-dev-data/datasets/"
    assert got["/datasets"]["S3"]["AutoImportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]
    assert got["/checkpoints"]["S3"]["AutoExportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]


def test_scratch_file_system_uses_the_service_key() -> None:
    _, fs = only(_build("SCRATCH_2"), "AWS::FSx::FileSystem")
    assert "KmsKeyId" not in fs["Properties"]
    assert "AutomaticBackupRetentionDays" not in fs["Properties"]["LustreConfiguration"]
