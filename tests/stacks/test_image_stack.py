"""Image: the Image Builder pipeline of the golden AMI, and the parameter the fleets launch from."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from aws_cdk import App, Stack

from config.catalog import get_instance_type
from config.image import COMPONENTS, VERSION_PARAMETERS
from config.naming import ResourceNames
from gpu_constructs.image.component import (
    MAX_INLINE_DATA,
    ImageComponent,
    content_version,
    strip_leading_comments,
)
from gpu_constructs.image.distribution import DistributionTarget, ImageDistribution
from gpu_constructs.image.recipe import ImageRecipe, RecipeStep
from gpu_constructs.security.permissions_boundary import BOUNDARY_ACTIONS
from tests.synth import StackTemplate, Synth

ENVS = ["dev", "staging", "prod"]
#: Environments that run the pipeline (image.build); the isolated ones only receive AMIs.
BUILDERS = ["dev"]
RECEIVERS = ["staging", "prod"]
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
AMI_PARAMETER_TYPE = "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"


def image(synth: Synth, env: str) -> StackTemplate:
    return synth.stack(env, "Image")


def _seed_resource(logical_id: str, resource: dict[str, Any]) -> bool:
    """The AMI parameter seed and its provider (tests/flows/test_ami_parameter_seed.py), left out here."""
    path = resource.get("Metadata", {}).get("aws:cdk:path", "")
    return "/AmiParameter/" in path or logical_id.startswith("AWS679f53fac002430cb0da5b7982bd2287")


def _one(stack: StackTemplate, type_: str) -> tuple[str, dict[str, Any]]:
    ((logical_id, resource),) = [(k, r) for k, r in stack.resources(type_).items() if not _seed_resource(k, r)]
    return logical_id, resource["Properties"]


def _getatt(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _components_by_id(stack: StackTemplate) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in stack.resources("AWS::ImageBuilder::Component").items()}


def _efa_fleets_launch_the_image(synth: Synth, env: str) -> bool:
    """An EFA fleet in ``env`` or in an environment it shares its AMIs with."""
    launching = [env, *synth.environments[env].image.share_with]
    return any(fleet.efa for name in launching for fleet in synth.environments[name].fleets)


def _expected_parameters(synth: Synth, env: str, key: str) -> dict[str, str]:
    cfg = synth.environments[env].image
    builder = get_instance_type(cfg.builder_instance_type)
    others = {
        "PipIndexUrl": cfg.pip_index_url,
        "ExpectedGpuCount": str(builder.gpu_count),
        "ExpectEfa": "true" if _efa_fleets_launch_the_image(synth, env) else "false",
    }
    values = {**cfg.versions, **others}
    return {p: values[p] for p in COMPONENTS.parameters(key)}


# --- pipeline ---------------------------------------------------------------------------------


@pytest.mark.parametrize("env", BUILDERS)
def test_pipeline_weekly_enabled_with_tests(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = image(synth, env)
    _, pipeline = _one(stack, "AWS::ImageBuilder::ImagePipeline")
    recipe_id, _ = _one(stack, "AWS::ImageBuilder::ImageRecipe")
    infra_id, _ = _one(stack, "AWS::ImageBuilder::InfrastructureConfiguration")
    dist_id, _ = _one(stack, "AWS::ImageBuilder::DistributionConfiguration")
    assert pipeline["Status"] == "ENABLED"
    assert pipeline["Schedule"] == {
        "ScheduleExpression": cfg.image.schedule,
        "PipelineExecutionStartCondition": "EXPRESSION_MATCH_AND_DEPENDENCY_UPDATES_AVAILABLE",
    }
    assert re.fullmatch(r"cron\(\d+ \d+ \? \* sun \*\)", cfg.image.schedule)  # weekly
    assert pipeline["ImageTestsConfiguration"]["ImageTestsEnabled"] is True
    assert pipeline["ImageTestsConfiguration"]["TimeoutMinutes"] >= 60
    assert pipeline["ImageRecipeArn"] == _getatt(recipe_id)
    assert pipeline["InfrastructureConfigurationArn"] == _getatt(infra_id)
    assert pipeline["DistributionConfigurationArn"] == _getatt(dist_id)
    assert pipeline["Name"] == f"{ResourceNames.of(cfg).prefix}-gpu-node"
    assert "ExecutionRole" not in pipeline  # Image Builder's service-linked role


@pytest.mark.parametrize("env", BUILDERS)
def test_pipeline_logs_encrypted_with_retention(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = image(synth, env)
    _, pipeline = _one(stack, "AWS::ImageBuilder::ImagePipeline")
    groups = {k: v["Properties"] for k, v in stack.resources("AWS::Logs::LogGroup").items() if not _seed_resource(k, v)}
    named = pipeline["LoggingConfiguration"]
    assert {v["Ref"] for v in named.values()} == set(groups)
    names = sorted(g["LogGroupName"] for g in groups.values())
    prefix = ResourceNames.of(cfg).prefix
    assert names == [f"/aws/imagebuilder/{prefix}-gpu-node", f"/aws/imagebuilder/pipeline/{prefix}-gpu-node"]
    for group in groups.values():
        assert "KeysLogs" in str(group["KmsKeyId"])
        assert group["RetentionInDays"] == cfg.logging.retention_days


# --- recipe and components --------------------------------------------------------------------


@pytest.mark.parametrize("env", BUILDERS)
def test_recipe_parent_from_config_and_components_in_order(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = image(synth, env)
    _, recipe = _one(stack, "AWS::ImageBuilder::ImageRecipe")
    components = _components_by_id(stack)
    prefix = ResourceNames.of(cfg).prefix
    assert recipe["ParentImage"] == f"ssm:{cfg.image.parent_image_parameter}"
    assert SEMVER.match(recipe["Version"])
    order = [components[c["ComponentArn"]["Fn::GetAtt"][0]]["Name"] for c in recipe["Components"]]
    assert order == [f"{prefix}-{key}" for key in COMPONENTS.RECIPE_ORDER]
    assert order[-1] == f"{prefix}-gpu-validation"  # the test component, last
    (root,) = recipe["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/sda1"
    key_id, _ = _one(stack, "AWS::KMS::Key")
    assert root["Ebs"] == {
        "DeleteOnTermination": True,
        "Encrypted": True,
        "KmsKeyId": _getatt(key_id),  # the AMI key: aws/ebs snapshots cannot be copied to another account
        "VolumeSize": cfg.image.root_volume_gib,
        "VolumeType": "gp3",
    }


@pytest.mark.parametrize("env", BUILDERS)
def test_recipe_passes_every_parameter_from_config(synth: Synth, env: str) -> None:
    stack = image(synth, env)
    _, recipe = _one(stack, "AWS::ImageBuilder::ImageRecipe")
    for key, step in zip(COMPONENTS.RECIPE_ORDER, recipe["Components"], strict=True):
        given = {p["Name"]: p["Value"] for p in step.get("Parameters", [])}
        # Every parameter the document declares (none has a default) is given, and nothing else.
        declared = [
            next(iter(p)) for p in yaml.safe_load(COMPONENTS.component_path(key).read_text()).get("parameters", [])
        ]
        assert sorted(given) == sorted(declared), key
        for name, value in _expected_parameters(synth, env, key).items():
            assert given[name] == [value], (key, name)


def test_versions_come_from_config_not_defaults(synth: Synth) -> None:
    """The recipe takes each building environment's own pins: a version changed in one file reaches only that recipe."""
    for env in BUILDERS:
        _, recipe = _one(image(synth, env), "AWS::ImageBuilder::ImageRecipe")
        given = {p["Name"]: p["Value"][0] for c in recipe["Components"] for p in c.get("Parameters", [])}
        assert {k: given[k] for k in VERSION_PARAMETERS} == synth.environments[env].image.versions


@pytest.mark.parametrize("env", BUILDERS)
def test_gpu_checks_expect_the_builders_gpus(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    _, recipe = _one(image(synth, env), "AWS::ImageBuilder::ImageRecipe")
    validation = {p["Name"]: p["Value"] for p in recipe["Components"][-1]["Parameters"]}
    assert validation["ExpectedGpuCount"] == [str(get_instance_type(cfg.image.builder_instance_type).gpu_count)]
    # dev's AMIs reach staging's and prod's EFA training fleets: its test checks their EFA software.
    assert validation["ExpectEfa"] == ["true"] and _efa_fleets_launch_the_image(synth, env)


@pytest.mark.parametrize("env", BUILDERS)
def test_node_scripts_reach_a_node_only_from_the_fleet_stack(synth: Synth, env: str) -> None:
    """The image bakes in the scripts' runtime, not the scripts: no asset, no component parameter, no S3
    object grant on the image side; the fleet stack holds the one asset the user data fetches."""
    stack = image(synth, env)
    assert "NodeScripts" not in json.dumps(stack.json)
    _, recipe = _one(stack, "AWS::ImageBuilder::ImageRecipe")
    runtime = recipe["Components"][COMPONENTS.RECIPE_ORDER.index("node-runtime")]
    assert "Parameters" not in runtime
    assert all(
        s["Action"] != "s3:GetObject" or s["Sid"] == "ImageBuilderAgent" for s in _statements(synth, env).values()
    )
    fleets = synth.stack(env, "Fleets").json["Resources"]
    assert any(key.startswith("NodeScriptsRead") for key in fleets), "the fleet stack publishes the node scripts"


@pytest.mark.parametrize("env", BUILDERS)
def test_one_component_per_document_with_its_content(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    components = {p["Name"]: p for p in _components_by_id(image(synth, env)).values()}
    prefix = ResourceNames.of(cfg).prefix
    # Every document but those only a Slurm environment's image carries (tests/stacks/test_image_build.py).
    documents = [COMPONENTS.component_path(key) for key in COMPONENTS.recipe_order(slurm=cfg.slurm is not None)]
    assert sorted(components) == sorted(f"{prefix}-{path.stem}" for path in documents)
    for path in documents:
        text = COMPONENTS.document(path.stem)
        component = components[f"{prefix}-{path.stem}"]
        # The file with its includes expanded, less its opening comment block (notes for people).
        assert component["Data"] == strip_leading_comments(text)
        assert text.endswith(component["Data"])
        assert yaml.safe_load(component["Data"]) == yaml.safe_load(text)
        assert len(component["Data"]) <= MAX_INLINE_DATA
        assert component["Platform"] == "Linux"
        assert component["Description"] == yaml.safe_load(text)["description"]
        assert SEMVER.match(component["Version"])


# --- infrastructure ---------------------------------------------------------------------------


@pytest.mark.parametrize("env", BUILDERS)
def test_infrastructure_private_gpu_subnet_imdsv2_terminates(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = image(synth, env)
    _, infra = _one(stack, "AWS::ImageBuilder::InfrastructureConfiguration")
    profile_id, profile = _one(stack, "AWS::IAM::InstanceProfile")
    role_id, _ = _one(stack, "AWS::IAM::Role")
    assert infra["InstanceTypes"] == [cfg.image.builder_instance_type]
    assert get_instance_type(cfg.image.builder_instance_type).gpu_count >= 1
    subnet = infra["SubnetId"]["Fn::GetStackOutput"]
    assert subnet["StackName"] == f"{env}-Network" and "gpuSubnet1Subnet" in subnet["OutputName"]
    # The builders' own group: package sources over HTTPS and HTTP, nothing in; the GPU nodes' group stays
    # at what a node calls.
    ((group,),) = [[g["Fn::GetAtt"] for g in infra["SecurityGroupIds"]]]
    builder = stack.json["Resources"][group[0]]["Properties"]
    assert "SecurityGroupIngress" not in builder
    assert {(r["CidrIp"], r["FromPort"], r["ToPort"]) for r in builder["SecurityGroupEgress"]} == {
        ("0.0.0.0/0", 443, 443),
        ("0.0.0.0/0", 80, 80),
    }
    assert infra["InstanceMetadataOptions"] == {"HttpTokens": "required", "HttpPutResponseHopLimit": 1}
    assert infra["TerminateInstanceOnFailure"] is True
    assert "KeyPair" not in infra
    assert infra["InstanceProfileName"] == {"Ref": profile_id}
    assert profile["Roles"] == [{"Ref": role_id}]
    assert infra["ResourceTags"]["CostCenter"] == cfg.tags["CostCenter"]


@pytest.mark.parametrize("env", BUILDERS)
def test_build_logs_to_a_hardened_log_bucket(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = image(synth, env)
    _, infra = _one(stack, "AWS::ImageBuilder::InfrastructureConfiguration")
    bucket_id, bucket = next(iter(stack.resources("AWS::S3::Bucket").items()))
    props = bucket["Properties"]
    assert infra["Logging"] == {"S3Logs": {"S3BucketName": {"Ref": bucket_id}, "S3KeyPrefix": "image-builder"}}
    assert props["BucketName"] == f"gpu-platform-{env}-image-logs-{cfg.account}-{cfg.region}"
    (sse,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert "KeysLogs" in str(sse["ServerSideEncryptionByDefault"]["KMSMasterKeyID"])
    assert props["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] is True
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert "AccessLogsBucket" in str(props["LoggingConfiguration"]["DestinationBucketName"])
    (rule,) = props["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == cfg.audit.log_expiration_days
    assert bucket["DeletionPolicy"] == ("Retain" if cfg.protect_stateful_resources else "Delete")


# --- distribution -----------------------------------------------------------------------------


@pytest.mark.parametrize("env", BUILDERS)
def test_distribution_writes_the_fleets_parameter_and_tags_versions(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = image(synth, env)
    _, dist = _one(stack, "AWS::ImageBuilder::DistributionConfiguration")
    (target,) = dist["Distributions"]  # every environment is in the builder's region
    assert target["Region"] == cfg.region
    assert target["SsmParameterConfigurations"][0] == {
        "ParameterName": ResourceNames.of(cfg).ami_parameter,
        "DataType": "aws:ec2:image",
    }  # no AmiAccountId: this account
    ami = target["AmiDistributionConfiguration"]
    assert ami["Name"] == f"gpu-platform-{env}-gpu-node-{{{{ imagebuilder:buildDate }}}}"
    tags = ami["AmiTags"]
    assert {k: tags[k] for k in VERSION_PARAMETERS} == cfg.image.versions
    assert tags["PipIndexUrl"] == cfg.image.pip_index_url
    assert tags["ParentImage"] == f"ssm:{cfg.image.parent_image_parameter}"
    assert {k: tags[k] for k in cfg.tags} == cfg.tags  # cost allocation reaches the AMI and its snapshots


@pytest.mark.parametrize("env", ENVS)
def test_ami_parameter_bootstraps_from_the_deep_learning_ami(synth: Synth, env: str) -> None:
    """Seeded by a custom resource (tests/flows/test_ami_parameter_seed.py follows its calls)."""
    cfg = synth.environments[env]
    stack = image(synth, env)
    # CloudFormation writes no value of it: no AWS::SSM::Parameter at all (tests/update/test_upgrade_names.py: how
    # the released one left the template)
    assert stack.resources("AWS::SSM::Parameter") == {}
    ((seed_id, seed),) = stack.resources("Custom::AWS").items()
    create = json.dumps(seed["Properties"]["Create"])
    name = ResourceNames.of(cfg).ami_parameter
    assert name.startswith("/imagebuilder/")  # the one path Image Builder's service-linked role writes
    assert f'\\"Name\\":\\"{name}\\"' in create and '\\"DataType\\":\\"aws:ec2:image\\"' in create
    (ref,) = [p["Ref"] for p in seed["Properties"]["Create"]["Fn::Join"][1] if isinstance(p, dict)]
    assert stack.json["Parameters"][ref]["Default"] == cfg.image.bootstrap_ami_parameter
    if cfg.image.build:
        dist_id, _ = _one(stack, "AWS::ImageBuilder::DistributionConfiguration")
        assert seed_id in stack.json["Resources"][dist_id]["DependsOn"]


def test_only_environments_with_internet_egress_build(synth: Synth) -> None:
    builders = [e for e, cfg in synth.environments.items() if cfg.image.build]
    assert builders == BUILDERS
    assert all(synth.environments[e].network.egress == "nat" for e in BUILDERS)
    assert all(synth.environments[e].network.egress == "isolated" for e in RECEIVERS)


@pytest.mark.parametrize("env", RECEIVERS)
def test_isolated_environments_have_no_pipeline(synth: Synth, env: str) -> None:
    """Nothing to build with, nothing built: no Image Builder resource, no build logs, no node scripts asset."""
    stack = image(synth, env)
    types = {r["Type"] for r in stack.json["Resources"].values()}
    assert not {t for t in types if t.startswith("AWS::ImageBuilder::")}
    assert stack.resources("AWS::S3::Bucket") == {}
    # the one log group is the AMI parameter seed's provider's
    assert [k for k in stack.resources("AWS::Logs::LogGroup")] == [
        k for k in stack.json["Resources"] if k.startswith("AmiParameterPutIfAbsentLogs")
    ]
    assert stack.resources("AWS::IAM::InstanceProfile") == {}
    assert len(stack.resources("Custom::AWS")) == 1


@pytest.mark.parametrize("env", ENVS)
def test_fleets_resolve_the_ami_parameter_at_deploy(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    fleets = synth.stack(env, "Fleets")
    ((name, param),) = [(k, p) for k, p in fleets.json["Parameters"].items() if p["Type"] == AMI_PARAMETER_TYPE]
    assert param["Default"] == ResourceNames.of(cfg).ami_parameter
    templates = fleets.resources("AWS::EC2::LaunchTemplate").values()
    assert templates
    for template in templates:
        assert template["Properties"]["LaunchTemplateData"]["ImageId"] == {"Ref": name}


# --- sharing: the building environment copies each AMI to the receiving ones -----------------

COPY_ROLE = "EC2ImageBuilderDistributionCrossAccountRole"
SNAPSHOT_KEY_USE = [
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
]


def _receivers(synth: Synth) -> list[Any]:
    return [synth.environments[e] for e in RECEIVERS]


def test_distribution_copies_the_ami_into_each_receiving_account(synth: Synth) -> None:
    dev = synth.environments["dev"]
    _, dist = _one(image(synth, "dev"), "AWS::ImageBuilder::DistributionConfiguration")
    (target,) = dist["Distributions"]
    ami = target["AmiDistributionConfiguration"]
    # A copy each receiving account owns (TargetAccountIds), not a launch permission on dev's AMI.
    assert ami["TargetAccountIds"] == sorted(cfg.account for cfg in _receivers(synth))
    assert dev.account not in ami["TargetAccountIds"]
    assert "LaunchPermissionConfiguration" not in ami
    assert "KmsKeyId" not in ami  # each copy: the receiving account's default EBS key
    assert target["SsmParameterConfigurations"][1:] == [
        {
            "ParameterName": f"/imagebuilder/gpu-platform/{cfg.name}/ami/latest",
            "DataType": "aws:ec2:image",
            "AmiAccountId": cfg.account,
        }
        for cfg in _receivers(synth)
    ]


def test_ami_key_is_retained_rotated_and_open_only_to_the_copy_roles(synth: Synth) -> None:
    dev = synth.environments["dev"]
    stack = image(synth, "dev")
    (key_id, key) = next(iter(stack.resources("AWS::KMS::Key").items()))
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain" and key["UpdateReplacePolicy"] == "Retain"
    (alias,) = stack.resources("AWS::KMS::Alias").values()
    assert alias["Properties"] == {"AliasName": "alias/gpu-platform/dev/ami", "TargetKeyId": _getatt(key_id)}
    statements = {s.get("Sid", "account"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    assert set(statements) == {
        "account",
        "AutoScalingLaunchesFromTheAmi",
        "AutoScalingGrantsForItsVolumes",
        "ReceivingAccountsCopyTheAmi",
        "ReceivingAccountsGrantsForTheCopy",
    }
    autoscaling = (
        f"arn:aws:iam::{dev.account}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
    )
    # By ARN in a condition, not as a principal: the role does not exist before the first group (tests/flows).
    assert statements["AutoScalingLaunchesFromTheAmi"]["Principal"] == {"AWS": "*"}
    assert statements["AutoScalingLaunchesFromTheAmi"]["Condition"] == {
        "ArnEquals": {"aws:PrincipalArn": autoscaling},
        "StringEquals": {"kms:CallerAccount": dev.account},
    }
    accounts = sorted(cfg.account for cfg in _receivers(synth))
    copy = statements["ReceivingAccountsCopyTheAmi"]
    assert sorted(copy["Action"]) == SNAPSHOT_KEY_USE
    assert copy["Principal"] == {"AWS": [f"arn:aws:iam::{a}:root" for a in accounts]}
    roles = [f"arn:aws:iam::{a}:role/{COPY_ROLE}" for a in accounts]
    assert copy["Condition"] == {"ArnEquals": {"aws:PrincipalArn": roles}}
    grants = statements["ReceivingAccountsGrantsForTheCopy"]
    assert grants["Action"] == "kms:CreateGrant"
    assert grants["Condition"] == {
        "ArnEquals": {"aws:PrincipalArn": roles},
        "Bool": {"kms:GrantIsForAWSResource": "true"},
    }


@pytest.mark.parametrize("env", RECEIVERS)
def test_receiving_account_lets_only_the_builders_image_builder_copy_in(synth: Synth, env: str) -> None:
    cfg, dev = synth.environments[env], synth.environments["dev"]
    stack = image(synth, env)
    role_id, props = _one(stack, "AWS::IAM::Role")
    assert props["RoleName"] == COPY_ROLE  # the name Image Builder looks up
    (trust,) = props["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRole"
    assert dev.account in str(trust["Principal"]["AWS"])
    assert trust["Condition"] == {
        "ArnEquals": {
            "aws:PrincipalArn": f"arn:aws:iam::{dev.account}:role/aws-service-role/imagebuilder.amazonaws.com/"
            "AWSServiceRoleForImageBuilder"
        }
    }
    assert "ManagedPolicyArns" not in props and "Policies" not in props  # no AWS managed policy
    assert "PermissionsBoundary" in props
    (policy,) = stack.resources("AWS::IAM::ManagedPolicy").values()
    assert policy["Properties"]["Roles"] == [{"Ref": role_id}]
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert set(statements) == {
        "CopyAmis",
        "DescribeAmis",
        "TagAmiCopies",
        "WriteAmiParameter",
        "SourceSnapshotKey",
        "SourceSnapshotKeyGrants",
    }
    # The AMI and its snapshots, in the source's region and this one (the same here): no "*" on a write.
    assert statements["CopyAmis"]["Action"] == "ec2:CopyImage"
    assert statements["CopyAmis"]["Resource"] == [
        f"arn:aws:ec2:{cfg.region}::image/*",
        f"arn:aws:ec2:{cfg.region}::snapshot/*",
    ]
    assert statements["DescribeAmis"]["Action"] == "ec2:DescribeImages"
    assert statements["DescribeAmis"]["Condition"] == {"StringEquals": {"aws:RequestedRegion": cfg.region}}
    assert sorted(statements["TagAmiCopies"]["Action"]) == ["ec2:CreateTags", "ec2:ModifyImageAttribute"]
    assert statements["TagAmiCopies"]["Resource"] == f"arn:aws:ec2:{cfg.region}::image/*"
    assert statements["WriteAmiParameter"] == {
        "Sid": "WriteAmiParameter",
        "Effect": "Allow",
        "Action": "ssm:PutParameter",
        "Resource": f"arn:aws:ssm:{cfg.region}:{cfg.account}:parameter/imagebuilder/gpu-platform/{env}/ami/latest",
    }
    source_keys = f"arn:aws:kms:{dev.region}:{dev.account}:key/*"
    assert sorted(statements["SourceSnapshotKey"]["Action"]) == SNAPSHOT_KEY_USE
    assert statements["SourceSnapshotKey"]["Resource"] == source_keys
    assert statements["SourceSnapshotKeyGrants"]["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    assert stack.resources("AWS::KMS::Key") == {}  # the copy is re-encrypted with this account's EBS key
    actions = {
        a for st in statements.values() for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    }
    assert actions - set(BOUNDARY_ACTIONS) == set()  # a grant beyond the boundary would be void


def test_distribution_groups_targets_by_region_and_account() -> None:
    """A target in another region gets its own distribution; a target in this account, no TargetAccountIds."""
    stack = Stack(App(), "Dist", env={"account": "111111111111", "region": "us-east-1"})
    dist = ImageDistribution(
        stack,
        "D",
        name="n",
        description="d",
        region="us-east-1",
        ami_name_prefix="p",
        ami_tags={"Project": "x"},
        parameter_name="/imagebuilder/own",
        targets=[
            DistributionTarget(account="222222222222", region="us-east-1", parameter_name="/imagebuilder/a"),
            DistributionTarget(account="111111111111", region="us-east-1", parameter_name="/imagebuilder/same"),
            DistributionTarget(account="333333333333", region="eu-west-1", parameter_name="/imagebuilder/b"),
        ],
    )
    east, west = stack.resolve(dist.configuration.distributions)
    assert east["region"] == "us-east-1" and west["region"] == "eu-west-1"
    assert east["amiDistributionConfiguration"]["TargetAccountIds"] == ["222222222222"]
    assert [(p["parameterName"], p.get("amiAccountId")) for p in east["ssmParameterConfigurations"]] == [
        ("/imagebuilder/own", None),
        ("/imagebuilder/a", "222222222222"),
        ("/imagebuilder/same", None),
    ]
    assert west["amiDistributionConfiguration"]["TargetAccountIds"] == ["333333333333"]
    assert [(p["parameterName"], p.get("amiAccountId")) for p in west["ssmParameterConfigurations"]] == [
        ("/imagebuilder/b", "333333333333")
    ]


# --- the build instance's role ----------------------------------------------------------------


def _policies(synth: Synth, env: str) -> dict[str, dict[str, Any]]:
    stack = image(synth, env)
    role_id, _ = _one(stack, "AWS::IAM::Role")
    return {
        k: v["Properties"]
        for k, v in stack.resources("AWS::IAM::ManagedPolicy").items()
        if v["Properties"]["Roles"] == [{"Ref": role_id}]
    }


def _statements(synth: Synth, env: str) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for p in _policies(synth, env).values() for s in p["PolicyDocument"]["Statement"]}


@pytest.mark.parametrize("env", BUILDERS)
def test_builder_role_is_least_privilege(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = image(synth, env)
    account, region = cfg.account, cfg.region
    prefix = ResourceNames.of(cfg).prefix
    _, role = _one(stack, "AWS::IAM::Role")
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert "ManagedPolicyArns" not in role and "Policies" not in role  # no AWS managed or inline policy
    # no inline policy on it (the seed's provider has its own role and policy)
    assert [k for k, v in stack.resources("AWS::IAM::Policy").items() if not _seed_resource(k, v)] == []
    statements = _statements(synth, env)
    assert set(statements) == {
        "CommandChannels",
        "RegisterInstance",
        "RecipeComponents",
        "ImageBuilderAgent",
        "BuildLogs",
        "BuildLogsKeyThroughS3",
        "ImageLogGroup",
    }
    for statement in statements.values():
        assert statement["Effect"] == "Allow"
    channels = statements["CommandChannels"]
    assert all(a.startswith(("ssmmessages:", "ec2messages:")) for a in channels["Action"])
    assert channels["Condition"] == {"StringEquals": {"aws:RequestedRegion": region}}
    assert statements["RegisterInstance"] == {
        "Sid": "RegisterInstance",
        "Effect": "Allow",
        "Action": "ssm:UpdateInstanceInformation",
        "Resource": f"arn:aws:ec2:{region}:{account}:instance/*",
    }
    components = statements["RecipeComponents"]
    assert components["Action"] == "imagebuilder:GetComponent"
    assert sorted(components["Resource"]) == sorted(
        f"arn:aws:imagebuilder:{region}:{account}:component/{prefix}-{key}/*" for key in COMPONENTS.RECIPE_ORDER
    )
    assert statements["ImageBuilderAgent"]["Resource"] == "arn:aws:s3:::ec2imagebuilder*/*"
    assert statements["BuildLogs"]["Action"] == "s3:PutObject"
    assert statements["BuildLogs"]["Resource"] == f"arn:aws:s3:::{prefix}-image-logs-{account}-{region}/image-builder/*"
    key = statements["BuildLogsKeyThroughS3"]
    assert sorted(key["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert "KeysLogs" in str(key["Resource"])
    assert key["Condition"] == {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}
    groups = {k: v for k, v in stack.resources("AWS::Logs::LogGroup").items() if not _seed_resource(k, v)}
    (image_logs,) = [k for k, v in groups.items() if "/pipeline/" not in v["Properties"]["LogGroupName"]]
    assert statements["ImageLogGroup"]["Resource"] == _getatt(image_logs)
    assert sorted(statements["ImageLogGroup"]["Action"]) == ["logs:CreateLogStream", "logs:PutLogEvents"]
    # Nothing else: no parameter reads, no wildcard action, no iam, no ec2 writes.
    actions = {a for s in statements.values() for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.endswith("*") or a.startswith(("iam:", "sts:", "ssm:Get", "ec2:")) for a in actions)


def test_builder_actions_fit_inside_the_permissions_boundary(synth: Synth) -> None:
    """A role's grant beyond its boundary is silently void: every build action must be in the ceiling."""
    for env in BUILDERS:
        actions = {
            a
            for s in _statements(synth, env).values()
            for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        }
        assert actions - set(BOUNDARY_ACTIONS) == set(), env


# --- the constructs on their own (no synth) ---------------------------------------------------


def test_content_version_changes_with_content() -> None:
    assert content_version("a", "doc") == content_version("a", "doc")
    assert content_version("a", "doc") != content_version("a", "doc2")
    major, minor, patch = (int(n) for n in content_version("x").split("."))
    assert (major, minor) == (1, 0) and 0 <= patch < 2**30  # Image Builder's limit per node


def test_strip_leading_comments_keeps_the_document() -> None:
    text = "# notes\n#\n\n# more\nname: x\n# inside\nphases: []\n"
    assert strip_leading_comments(text) == "name: x\n# inside\nphases: []\n"
    assert strip_leading_comments("name: x\n") == "name: x\n"


def test_components_and_recipe_get_new_versions_when_they_change() -> None:
    """CloudFormation replaces an Image Builder component or recipe on any change: it must carry a new version."""
    stack = Stack(App(), "Versions")
    doc = "name: x\nschemaVersion: 1.0\nphases: []\n"
    a = ImageComponent(stack, "A", name="c", description="d", document=doc)
    b = ImageComponent(stack, "B", name="c", description="d", document=doc + "# changed\n")
    assert a.version != b.version

    def recipe(construct_id: str, component: ImageComponent, value: str) -> str:
        return ImageRecipe(
            stack,
            construct_id,
            name="r",
            description="d",
            parent_image="ssm:/aws/service/x",
            steps=[RecipeStep(component, {"V": value})],
            root_device_name="/dev/sda1",
            root_volume_gib=100,
        ).version

    assert recipe("R1", a, "1") == recipe("R2", a, "1")
    assert recipe("R3", a, "1") != recipe("R4", a, "2")  # a pinned version changed
    assert recipe("R5", a, "1") != recipe("R6", b, "1")  # a component changed


def test_component_too_large_to_inline_is_refused() -> None:
    with pytest.raises(ValueError, match=r"image component big: its document has 16001 characters"):
        ImageComponent(Stack(App(), "Big"), "C", name="big", description="d", document="x" * 16_001)
