"""Security and audit: keys, trail, buckets, the node role, the boundary, no SSH."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from config.naming import ResourceNames
from gpu_constructs.security.permissions_boundary import SCOPED_ACTIONS
from tests.iam_documents import Resolver
from tests.synth import StackTemplate, Synth

ENVS = ["dev", "staging", "prod"]


def security(synth: Synth, env: str) -> StackTemplate:
    return synth.stack(env, "Security")


def _one(stack: StackTemplate, type_: str, contains: str) -> tuple[str, dict]:
    (match,) = [(k, v) for k, v in stack.resources(type_).items() if contains in k]
    return match


def _statements(policy: dict) -> dict[str, dict]:
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}


@pytest.mark.parametrize("env", ENVS)
def test_four_keys_with_rotation(synth: Synth, env: str) -> None:
    keys = security(synth, env).resources("AWS::KMS::Key")
    assert sorted(k.split("Keys")[1][:4] for k in keys) == ["Aler", "Data", "Logs", "Trai"]
    for key in keys.values():
        assert key["Properties"]["EnableKeyRotation"] is True
        assert key["Properties"]["PendingWindowInDays"] == 30


@pytest.mark.parametrize("env", ENVS)
def test_key_policies_grant_only_their_users(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = security(synth, env)
    policies = {
        k: {s.get("Sid"): s for s in v["Properties"]["KeyPolicy"]["Statement"]}
        for k, v in stack.resources("AWS::KMS::Key").items()
    }
    account_root = {"AWS": f"arn:aws:iam::{cfg.account}:root"}
    for statements in policies.values():
        (admin,) = [s for s in statements.values() if s["Principal"] == account_root]
        assert admin["Action"] == "kms:*"
    (logs,) = [p for k, p in policies.items() if "KeysLogs" in k]
    (data,) = [p for k, p in policies.items() if "KeysData" in k]
    (trail,) = [p for k, p in policies.items() if "KeysTrail" in k]
    assert logs["CloudWatchLogsOfThisAccount"]["Principal"] == {"Service": f"logs.{cfg.region}.amazonaws.com"}
    assert set(logs) == {None, "CloudWatchLogsOfThisAccount", "CloudWatchLogsDescribesKey"}
    slr = f"arn:aws:iam::{cfg.account}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
    # The service-linked role by ARN in a condition: it does not exist before the account's first group.
    by_arn = {"ArnEquals": {"aws:PrincipalArn": slr}, "StringEquals": {"kms:CallerAccount": cfg.account}}
    assert data["AutoScalingEncryptsNodeVolumes"]["Principal"] == {"AWS": "*"}
    assert data["AutoScalingEncryptsNodeVolumes"]["Condition"] == by_arn
    assert data["AutoScalingGrantsForAttachedVolumes"]["Condition"] == {
        **by_arn,
        "Bool": {"kms:GrantIsForAWSResource": "true"},
    }
    assert set(data) == {
        None,
        "AutoScalingEncryptsNodeVolumes",
        "AutoScalingGrantsForAttachedVolumes",
        "FsxLinkedRolesUseDataBucket",
    }
    fsx = data["FsxLinkedRolesUseDataBucket"]
    assert fsx["Principal"] == {"AWS": "*"}
    assert fsx["Condition"]["ArnLike"] == {
        "aws:PrincipalArn": f"arn:aws:iam::{cfg.account}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
        "AWSServiceRoleForFSxS3Access_*"
    }
    assert fsx["Condition"]["StringEquals"] == {
        "kms:CallerAccount": cfg.account,
        "kms:ViaService": f"s3.{cfg.region}.amazonaws.com",
    }
    encrypt = trail["CloudTrailEncryptsThisAccountsTrails"]
    assert encrypt["Principal"] == {"Service": "cloudtrail.amazonaws.com"}
    assert encrypt["Condition"]["StringLike"] == {
        "kms:EncryptionContext:aws:cloudtrail:arn": f"arn:aws:cloudtrail:*:{cfg.account}:trail/*"
    }
    assert set(trail) == {None, "CloudTrailEncryptsThisAccountsTrails", "CloudTrailDescribesKey"}


@pytest.mark.parametrize("env", ENVS)
def test_trail(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    stack = security(synth, env)
    (trail,) = stack.resources("AWS::CloudTrail::Trail").values()
    props = trail["Properties"]
    assert props["IsMultiRegionTrail"] is True
    assert props["IncludeGlobalServiceEvents"] is True
    assert props["EnableLogFileValidation"] is True
    assert props["IsLogging"] is True
    assert props["KMSKeyId"] == {
        "Fn::GetAtt": [next(k for k in stack.resources("AWS::KMS::Key") if "Trail" in k), "Arn"]
    }
    assert props["S3BucketName"] == {
        "Ref": next(k for k in stack.resources("AWS::S3::Bucket") if k.startswith("AuditBucket"))
    }
    group_id = props["CloudWatchLogsLogGroupArn"]["Fn::GetAtt"][0]
    group = stack.json["Resources"][group_id]["Properties"]
    assert "KmsKeyId" in group and group["RetentionInDays"] == cfg.logging.retention_days
    data_bucket = ResourceNames.of(cfg).data_bucket
    assert props["EventSelectors"] == [
        {"IncludeManagementEvents": True, "ReadWriteType": "All"},  # management events, read and write
        {
            "DataResources": [{"Type": "AWS::S3::Object", "Values": [f"arn:aws:s3:::{data_bucket}/"]}],
            "IncludeManagementEvents": False,
            "ReadWriteType": "All",
        },
    ]


def _bucket_policy(stack: StackTemplate, bucket_id: str) -> list[dict]:
    (policy,) = [
        p for p in stack.resources("AWS::S3::BucketPolicy").values() if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    return policy["Properties"]["PolicyDocument"]["Statement"]


@pytest.mark.parametrize("env", ENVS)
def test_every_bucket_is_hardened(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    for stack in (s for s in synth.stacks.values() if s.env == env):
        buckets = stack.resources("AWS::S3::Bucket")
        access_logs = [k for k in buckets if k.startswith("AccessLogs")]
        for bucket_id, bucket in buckets.items():
            props = bucket["Properties"]
            assert props["PublicAccessBlockConfiguration"] == {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            }
            assert props["VersioningConfiguration"] == {"Status": "Enabled"}
            assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
            (sse,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            if bucket_id in access_logs:
                # S3 server access logs can only be delivered to SSE-S3 buckets.
                assert sse["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
                assert "LoggingConfiguration" not in props
            else:
                assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
                assert "KMSMasterKeyID" in sse["ServerSideEncryptionByDefault"]
                destination = props["LoggingConfiguration"]["DestinationBucketName"]
                if access_logs:
                    assert destination == {"Ref": access_logs[0]}
                else:  # another stack's bucket: the Security stack's access log bucket
                    assert destination["Fn::GetStackOutput"]["StackName"] == f"{env}-Security"
                    assert "AccessLogsBucket" in destination["Fn::GetStackOutput"]["OutputName"]
            statements = _bucket_policy(stack, bucket_id)
            denies = [s for s in statements if s["Effect"] == "Deny"]
            assert {"Bool": {"aws:SecureTransport": "false"}} in [s["Condition"] for s in denies]
            assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in [s["Condition"] for s in denies]
            rule = props["LifecycleConfiguration"]["Rules"][0]
            assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
            if bucket_id.startswith(("AccessLogs", "AuditBucket")):  # log buckets: retention from config
                assert rule["ExpirationInDays"] == cfg.audit.log_expiration_days
                assert rule["Transitions"] == [
                    {"StorageClass": "GLACIER_IR", "TransitionInDays": cfg.audit.log_transition_days}
                ]
            else:  # the data bucket keeps its objects; old versions go after 30 days
                assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}


@pytest.mark.parametrize("env", ENVS)
def test_trail_bucket_object_lock_only_where_configured(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    (bucket,) = [v for k, v in security(synth, env).resources("AWS::S3::Bucket").items() if k.startswith("AuditBucket")]
    lock = cfg.audit.trail_object_lock
    if lock is None:
        assert "ObjectLockEnabled" not in bucket["Properties"]
    else:
        assert bucket["Properties"]["ObjectLockEnabled"] is True
        assert bucket["Properties"]["ObjectLockConfiguration"]["Rule"]["DefaultRetention"] == {
            "Mode": lock.mode.value.upper(),
            "Days": lock.retention_days,
        }
    assert (env == "prod") is (lock is not None)


def test_prods_trail_bucket_is_locked_in_compliance_mode(synth: Synth) -> None:
    """Governance mode can be bypassed with s3:BypassGovernanceRetention; compliance mode by no one,
    root included, for the retention period (S3 Object Lock). The prod template says compliance."""
    (bucket,) = [
        v for k, v in security(synth, "prod").resources("AWS::S3::Bucket").items() if k.startswith("AuditBucket")
    ]
    rule = bucket["Properties"]["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]
    assert rule["Mode"] == "COMPLIANCE" and rule["Days"] >= 365
    assert bucket["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("env", ENVS)
def test_node_role_statements(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    stack = security(synth, env)
    (role_id,) = [k for k in stack.resources("AWS::IAM::Role") if k.startswith("GpuNodeRole")]
    role = stack.json["Resources"][role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    assert "Policies" not in role and "ManagedPolicyArns" not in role  # AWS managed policies: none
    policies = {
        k.split("GpuNode")[1]: v["Properties"]
        for k, v in stack.resources("AWS::IAM::ManagedPolicy").items()
        if k.startswith("GpuNode")
    }
    assert sorted(p[:8] for p in policies) == ["CloudWat", "Containe", "DataBuck", "FleetLif", "SessionM", "Training"]
    for policy in policies.values():
        assert policy["Roles"] == [{"Ref": role_id}]
    by_name = {k[:8]: _statements(v) for k, v in policies.items()}
    arn_prefix = f"arn:aws:{{}}:{cfg.region}:{cfg.account}"

    metrics = by_name["CloudWat"]["PlatformMetricsOnly"]
    assert metrics["Action"] == "cloudwatch:PutMetricData"
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": names.metrics_namespace}}
    assert (
        by_name["CloudWat"]["NodeLogGroups"]["Resource"]
        == f"{arn_prefix.format('logs')}:log-group:{names.node_log_group_prefix}*"
    )

    data = by_name["DataBuck"]
    bucket = f"arn:aws:s3:::{names.data_bucket}"
    assert sorted(data["ReadDatasetsAndCheckpoints"]["Resource"]) == [f"{bucket}/checkpoints/*", f"{bucket}/datasets/*"]
    assert data["WriteCheckpoints"]["Resource"] == f"{bucket}/checkpoints/*"
    assert data["ListOwnPrefixes"]["Condition"] == {"StringLike": {"s3:prefix": ["datasets/*", "checkpoints/*"]}}
    assert data["DataKeyThroughS3"]["Condition"] == {
        "StringEquals": {"kms:ViaService": f"s3.{cfg.region}.amazonaws.com"}
    }

    fleet = by_name["FleetLif"]
    assert sorted(fleet["OwnGroupsOnly"]["Action"]) == [
        "autoscaling:CompleteLifecycleAction",
        "autoscaling:RecordLifecycleActionHeartbeat",
        "autoscaling:SetInstanceHealth",
    ]
    assert fleet["OwnGroupsOnly"]["Resource"] == (
        f"{arn_prefix.format('autoscaling')}:autoScalingGroup:*:autoScalingGroupName/{names.asg_name_prefix}*"
    )
    assert all(a.split(":")[1].startswith("Describe") for a in fleet["ReadOnlyDescribe"]["Action"])

    images = by_name["Containe"]
    assert images["RegistryLogin"]["Action"] == "ecr:GetAuthorizationToken"  # no resource type
    assert sorted(images["PullFromThisAccount"]["Action"]) == [
        "ecr:BatchCheckLayerAvailability",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
    ]
    assert images["PullFromThisAccount"]["Resource"] == f"{arn_prefix.format('ecr')}:repository/*"

    (job_group,) = [
        k
        for k, v in stack.resources("AWS::Logs::LogGroup").items()
        if v["Properties"].get("LogGroupName") == names.job_log_group
    ]
    assert by_name["Training"]["JobLogStreams"]["Resource"] == {"Fn::GetAtt": [job_group, "Arn"]}
    assert sorted(by_name["Training"]["JobLogStreams"]["Action"]) == ["logs:CreateLogStream", "logs:PutLogEvents"]

    session = by_name["SessionM"]
    assert session["SessionChannels"]["Condition"] == {"StringEquals": {"aws:RequestedRegion": cfg.region}}
    (doc,) = stack.resources("AWS::SSM::Document").values()
    session_group = doc["Properties"]["Content"]["inputs"]["cloudWatchLogGroupName"]["Ref"]
    assert session["SessionLogs"]["Resource"] == {"Fn::GetAtt": [session_group, "Arn"]}


_READ_ONLY_PREFIXES = ("Describe", "Get", "List")


def test_no_wildcard_action_and_no_unconditioned_star_on_writes(synth: Synth) -> None:
    """No Action "*"; Resource "*" on a write only where the API has no resource type, with a condition."""
    allowed_unscoped_writes = {
        # PutMetricData: no resource type; held to the platform namespace by a condition.
        "cloudwatch:PutMetricData",
        # Session Manager channels: no resource types; held to the region by a condition.
        *(
            f"ssmmessages:{a}"
            for a in ("CreateControlChannel", "CreateDataChannel", "OpenControlChannel", "OpenDataChannel")
        ),
        *(
            f"ec2messages:{a}"
            for a in ("AcknowledgeMessage", "DeleteMessage", "FailMessage", "GetEndpoint", "GetMessages", "SendReply")
        ),
        # RunInstances touches many resource types; held by conditions to launches through the fleets'
        # launch templates with only the templates' resources (the AMI rollout runbook's role).
        "ec2:RunInstances",
    }
    for stack in synth.stacks.values():
        for logical_id, res in stack.json["Resources"].items():
            if res["Type"] not in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
                continue
            if logical_id.startswith("BoundaryPolicy"):
                continue  # a boundary grants nothing (checked below)
            for st in res["Properties"]["PolicyDocument"]["Statement"]:
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                assert "*" not in actions, (stack.name, logical_id)
                if st.get("Resource") == "*" or st.get("Resource") == ["*"]:
                    for action in actions:
                        if action.split(":")[1].startswith(_READ_ONLY_PREFIXES):
                            continue
                        assert action in allowed_unscoped_writes, (stack.name, logical_id, action)
                        assert st.get("Condition"), (stack.name, logical_id, action)


def _as_list(value: object) -> list:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("env", ENVS)
def test_every_role_carries_the_boundary(synth: Synth, env: str) -> None:
    boundary_id = next(
        k for k in security(synth, env).resources("AWS::IAM::ManagedPolicy") if k.startswith("BoundaryPolicy")
    )
    boundary = security(synth, env).json["Resources"][boundary_id]["Properties"]
    assert boundary["ManagedPolicyName"] == ResourceNames.of(synth.environments[env]).permissions_boundary
    statements = {s["Sid"]: s for s in boundary["PolicyDocument"]["Statement"]}
    ceiling = statements.pop("PlatformCeiling")
    assert ceiling["Effect"] == "Allow"
    assert not any(a.startswith(("iam:", "organizations:", "cloudtrail:", "sts:")) for a in ceiling["Action"])
    assert not any(a.endswith("*") for a in ceiling["Action"])
    # Beyond the ceiling: data, keys, the AMI parameter, AMI copies and security group rules on the
    # environment's resources only (tests/flows/test_role_boundaries.py evaluates them), launch only through
    # launch templates, tag only on launch, pass two named roles.
    scoped = {sid: statements.pop(sid) for sid in SCOPED_ACTIONS}
    for sid, statement in scoped.items():
        assert statement["Effect"] == "Allow" and "*" not in _as_list(statement["Resource"]), sid
    assert sorted(statements) == [
        "LaunchOnlyThroughLaunchTemplates",
        "PassAmiRolloutRoleToSsm",
        "PassNodeRoleToEc2",
        "TagOnlyOnLaunch",
    ]
    for statement in statements.values():
        assert statement["Effect"] == "Allow" and statement["Condition"]
        assert isinstance(statement["Action"], str)  # one action each
    assert statements["LaunchOnlyThroughLaunchTemplates"]["Action"] == "ec2:RunInstances"
    assert statements["LaunchOnlyThroughLaunchTemplates"]["Condition"]["Bool"] == {
        "ec2:IsLaunchTemplateResource": "true"
    }
    assert statements["TagOnlyOnLaunch"]["Action"] == "ec2:CreateTags"
    assert statements["TagOnlyOnLaunch"]["Condition"] == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}
    roles = 0
    for stack in (s for s in synth.stacks.values() if s.env == env):
        for logical_id, res in stack.resources("AWS::IAM::Role").items():
            roles += 1
            pb = res["Properties"]["PermissionsBoundary"]
            if stack.name.endswith("-Security"):
                assert pb == {"Ref": boundary_id}, logical_id
            else:
                assert pb["Fn::GetStackOutput"]["StackName"] == f"{env}-Security", logical_id
    assert roles >= 4


def test_no_ssh_anywhere(synth: Synth) -> None:
    for stack in synth.stacks.values():
        assert stack.resources("AWS::EC2::KeyPair") == {}
        for res in stack.json["Resources"].values():
            props = res.get("Properties", {})
            assert "KeyName" not in props and "KeyName" not in props.get("LaunchTemplateData", {})
            rules = []
            if res["Type"] == "AWS::EC2::SecurityGroup":
                rules = props.get("SecurityGroupIngress", [])
            elif res["Type"] == "AWS::EC2::SecurityGroupIngress":
                rules = [props]
            for rule in rules:
                if rule["IpProtocol"] in ("tcp", "6"):
                    assert not rule["FromPort"] <= 22 <= rule["ToPort"], stack.name
                # all-traffic rules exist only between members of one group, never from an address range
                if rule["IpProtocol"] == "-1":
                    assert "CidrIp" not in rule and "CidrIpv6" not in rule, stack.name


@pytest.mark.parametrize("env", ENVS)
def test_session_manager_logs_to_encrypted_group(synth: Synth, env: str) -> None:
    stack = security(synth, env)
    (doc,) = stack.resources("AWS::SSM::Document").values()
    props = doc["Properties"]
    assert props["DocumentType"] == "Session"
    assert props["Name"] == ResourceNames.of(synth.environments[env]).session_document
    inputs = props["Content"]["inputs"]
    assert inputs["cloudWatchEncryptionEnabled"] is True and inputs["cloudWatchStreamingEnabled"] is True
    assert inputs["runAsEnabled"] is False
    group_id = inputs["cloudWatchLogGroupName"]["Ref"]
    group = stack.json["Resources"][group_id]["Properties"]
    assert group["LogGroupName"] == ResourceNames.of(synth.environments[env]).session_log_group
    assert "KmsKeyId" in group


@pytest.mark.parametrize("env", ENVS)
def test_boundary_passes_only_the_two_named_roles_each_to_one_service(synth: Synth, env: str) -> None:
    """iam:PassRole is the boundary's only IAM action: the runbook's role to SSM (EventBridge starts the
    runbook as it), the node role to EC2 (Auto Scaling checks it when the runbook points a group at a
    new launch template version)."""
    cfg = synth.environments[env]
    names = ResourceNames.of(cfg)
    stack = security(synth, env)
    resolve = Resolver(stack.json, account=cfg.account, region=cfg.region).resolve
    boundary_id = next(k for k in stack.resources("AWS::IAM::ManagedPolicy") if k.startswith("BoundaryPolicy"))
    statements = {
        s["Sid"]: s for s in stack.json["Resources"][boundary_id]["Properties"]["PolicyDocument"]["Statement"]
    }
    passes = {sid: s for sid, s in statements.items() if "iam:PassRole" in s["Action"]}
    assert sorted(passes) == ["PassAmiRolloutRoleToSsm", "PassNodeRoleToEc2"]
    rollout, node = passes["PassAmiRolloutRoleToSsm"], passes["PassNodeRoleToEc2"]
    assert rollout["Action"] == node["Action"] == "iam:PassRole"
    assert resolve(rollout["Resource"]) == f"arn:aws:iam::{cfg.account}:role/{names.ami_rollout_role}"
    assert rollout["Condition"] == {"StringEquals": {"iam:PassedToService": "ssm.amazonaws.com"}}
    assert node["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
    # The node role has no explicit name: CloudFormation names it <stack>-<logical id>-<suffix>.
    pattern = resolve(node["Resource"])
    assert pattern == f"arn:aws:iam::{cfg.account}:role/{env}-Security-GpuNodeRole*"
    (node_role_id,) = [k for k in stack.resources("AWS::IAM::Role") if k.startswith("GpuNodeRole")]
    assert fnmatchcase(f"arn:aws:iam::{cfg.account}:role/{env}-Security-{node_role_id}-AbCdEf123456", pattern)
    other_roles = [k for k in stack.resources("AWS::IAM::Role") if k != node_role_id]
    assert not any(fnmatchcase(f"arn:aws:iam::{cfg.account}:role/{env}-Security-{k}-X", pattern) for k in other_roles)
    rollout_roles = [
        r for r in synth.stack(env, "Fleets").resources("AWS::IAM::Role").values()
        if r["Properties"].get("RoleName") == names.ami_rollout_role
    ]  # fmt: skip
    if not any(f.rollout is not None for f in cfg.fleets):
        assert rollout_roles == []  # no fleet rolls automatically (prod): no runbook role to pass
        return
    (rollout_role,) = rollout_roles
    assert rollout_role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "ssm.amazonaws.com"
    }
