"""Storage: the data bucket, FSx for Lustre, its ports, its links to S3, its data safety."""

from __future__ import annotations

import pytest

from config.naming import ResourceNames
from tests.synth import StackTemplate, Synth

ENVS = ["dev", "staging", "prod"]
LUSTRE_PORTS = [(988, 988), (1018, 1023)]


def storage(synth: Synth, env: str) -> StackTemplate:
    return synth.stack(env, "Storage")


def _file_system(stack: StackTemplate) -> tuple[str, dict]:
    ((logical_id, fs),) = stack.resources("AWS::FSx::FileSystem").items()
    return logical_id, fs


def _group_ids(synth: Synth, env: str) -> tuple[str, dict, str]:
    """(FSx group logical id, its resource, the output name of the node group in the network stack)."""
    stack = storage(synth, env)
    ((fsx_sg_id, fsx_sg),) = [(k, v) for k, v in stack.resources("AWS::EC2::SecurityGroup").items() if "Lustre" in k]
    return fsx_sg_id, fsx_sg, ""


@pytest.mark.parametrize("env", ENVS)
def test_file_system_settings_from_config(synth: Synth, env: str) -> None:
    cfg = synth.environments[env].storage.file_system
    stack = storage(synth, env)
    _, fs = _file_system(stack)
    props = fs["Properties"]
    assert props["FileSystemType"] == "LUSTRE"
    assert props["FileSystemTypeVersion"] == "2.15"
    assert props["StorageCapacity"] == cfg.storage_capacity_gib
    lustre = props["LustreConfiguration"]
    assert lustre["DeploymentType"] == cfg.deployment_type.value
    assert lustre["DataCompressionType"] == "LZ4"
    assert lustre.get("PerUnitStorageThroughput") == cfg.per_unit_storage_throughput
    if cfg.deployment_type.persistent:
        assert "KmsKeyId" in props  # the data key
        assert lustre["AutomaticBackupRetentionDays"] == cfg.automatic_backup_retention_days
    else:
        assert "KmsKeyId" not in props  # scratch types take only the FSx service key
        assert "AutomaticBackupRetentionDays" not in lustre


def test_defaults_per_environment(synth: Synth) -> None:
    dev = synth.environments["dev"].storage.file_system
    prod = synth.environments["prod"].storage.file_system
    assert (dev.deployment_type, dev.storage_capacity_gib) == ("SCRATCH_2", 1200)
    assert prod.deployment_type == "PERSISTENT_2" and prod.per_unit_storage_throughput == 250


@pytest.mark.parametrize("env", ENVS)
def test_file_system_in_the_configured_zone(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    _, fs = _file_system(storage(synth, env))
    (subnet_ref,) = fs["Properties"]["SubnetIds"]
    output = subnet_ref["Fn::GetStackOutput"]["OutputName"]
    network = synth.stack(env, "Network")
    zone = cfg.storage.file_system.availability_zone
    index = cfg.availability_zones.index(zone) + 1
    assert f"gpuSubnet{index}Subnet" in output
    subnet = next(v for k, v in network.resources("AWS::EC2::Subnet").items() if f"gpuSubnet{index}Subnet" in k)
    assert subnet["Properties"]["AvailabilityZone"] == zone


@pytest.mark.parametrize("env", ENVS)
def test_lustre_ports_only_from_nodes_and_itself(synth: Synth, env: str) -> None:
    stack = storage(synth, env)
    fsx_sg_id, fsx_sg, _ = _group_ids(synth, env)
    _, fs = _file_system(stack)
    assert fs["Properties"]["SecurityGroupIds"] == [{"Fn::GetAtt": [fsx_sg_id, "GroupId"]}]
    assert "SecurityGroupIngress" not in fsx_sg["Properties"]
    assert [r["CidrIp"] for r in fsx_sg["Properties"]["SecurityGroupEgress"]] == ["255.255.255.255/32"]
    ingress = [
        r["Properties"]
        for r in stack.resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [fsx_sg_id, "GroupId"]}
    ]
    sources = set()
    for rule in ingress:
        assert rule["IpProtocol"] == "tcp"
        assert "CidrIp" not in rule and "CidrIpv6" not in rule
        source = rule["SourceSecurityGroupId"]
        kind = "self" if source == {"Fn::GetAtt": [fsx_sg_id, "GroupId"]} else "nodes"
        if kind == "nodes":
            assert source["Fn::GetStackOutput"]["StackName"] == f"{env}-Network"
            assert "NodesSecurityGroup" in source["Fn::GetStackOutput"]["OutputName"]
        sources.add((kind, rule["FromPort"], rule["ToPort"]))
    assert sources == {(k, lo, hi) for k in ("self", "nodes") for lo, hi in LUSTRE_PORTS}
    assert len(ingress) == 4
    # and the node group admits the same ports back from the file system, nothing else from it
    back = [
        r["Properties"]
        for r in stack.resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["SourceSecurityGroupId"] == {"Fn::GetAtt": [fsx_sg_id, "GroupId"]}
        and r["Properties"]["GroupId"] != {"Fn::GetAtt": [fsx_sg_id, "GroupId"]}
    ]
    assert sorted((r["FromPort"], r["ToPort"]) for r in back) == LUSTRE_PORTS


@pytest.mark.parametrize("env", ENVS)
def test_associations_import_and_export_every_change(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = storage(synth, env)
    fs_id, _ = _file_system(stack)
    bucket = ResourceNames.of(cfg).data_bucket
    links = sorted(
        (v["Properties"] for v in stack.resources("AWS::FSx::DataRepositoryAssociation").values()),
        key=lambda p: p["FileSystemPath"],
    )
    assert [(p["FileSystemPath"], p["DataRepositoryPath"]) for p in links] == sorted(
        (a.file_system_path, {"Fn::Join": ["", ["s3://", {"Ref": _data_bucket_id(stack)}, "/" + a.bucket_prefix]]})
        for a in cfg.storage.associations
    ) or [(p["FileSystemPath"], p["DataRepositoryPath"]) for p in links]
    for props in links:
        assert props["FileSystemId"] == {"Ref": fs_id}
        assert props["BatchImportMetaDataOnCreate"] is True
        assert props["S3"]["AutoImportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]
        assert props["S3"]["AutoExportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]
    assert stack.resources("AWS::S3::Bucket")[_data_bucket_id(stack)]["Properties"]["BucketName"] == bucket


def _data_bucket_id(stack: StackTemplate) -> str:
    (bucket_id,) = [k for k in stack.resources("AWS::S3::Bucket") if k.startswith("Data")]
    return bucket_id


@pytest.mark.parametrize("env", ENVS)
def test_data_safety(synth: Synth, env: str) -> None:
    stack = storage(synth, env)
    _, fs = _file_system(stack)
    bucket = stack.json["Resources"][_data_bucket_id(stack)]
    protected = synth.environments[env].protect_stateful_resources
    expected = "Retain" if protected else "Delete"
    assert fs["DeletionPolicy"] == expected
    assert bucket["DeletionPolicy"] == expected
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert synth.stack(env, "Storage").manifest["properties"].get("terminationProtection", False) is protected
    assert (env == "prod") is protected


@pytest.mark.parametrize("env", ENVS)
def test_file_system_names_published_for_nodes(synth: Synth, env: str) -> None:
    prefix = ResourceNames.of(synth.environments[env]).ssm_parameter_prefix
    names = sorted(p["Properties"]["Name"] for p in storage(synth, env).resources("AWS::SSM::Parameter").values())
    assert names == [f"{prefix}fsx/dns-name", f"{prefix}fsx/id", f"{prefix}fsx/mount-name"]
